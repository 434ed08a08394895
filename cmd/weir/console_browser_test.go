package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// -console-screenshots also writes each page's screenshot to
// docs/console/, for the README.
var consoleScreenshots = flag.Bool("console-screenshots", false, "write the console's screenshots to docs/console/")

// browserPath finds a Chromium to drive. Without one the browser tests
// skip with one reason, unless WEIR_TEST_BROWSER=required (CI) makes that a
// failure.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("WEIR_TEST_BROWSER") == "required" {
		t.Fatal("no Chromium found and WEIR_TEST_BROWSER=required (apt-get install -y chromium)")
	}
	t.Skip("no Chromium found: the console's browser tests need one (apt-get install -y chromium)")
	return ""
}

const consoleFlows = `
flow(name = "gate", doc = "A person approves, then the run goes on.", nodes = [
    wait("approve", args = lambda ctx: {"to": "ann", "amount": ctx.input.get("amount", 0)}, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"ok": ctx.results["approve"]}),
])
flow(name = "echo", nodes = [task("e", tool = "testkit.echo", args = lambda ctx: ctx.input)])
flow(name = "slow", nodes = [task("s", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])
flow(name = "review", nodes = [
    fanout("each", items = [1, 2, 3], flow = "gate", args = lambda ctx, item: {"amount": item}, width = 3, depth = 1, max_items = 3),
])
flow(name = "mailer", nodes = [
    agent("a", model = "small", prompt = "Mail ann", tools = ["mail.send"], approve = ["mail.send"], max_turns = 3),
])
flow(name = "failing", nodes = [task("f", tool = "testkit.fail", args = {"times": 5, "code": "E_UPSTREAM"}, retries = 1)])
`

const (
	consoleAlice = "alice-console-token-0123456789"
	consoleBob   = "bob-console-token-0123456789ab"
)

// consoleDaemon starts a real daemon with a tcp block (alice's and bob's
// tokens) and the console, and returns it with the console's URL and a
// client per user.
func consoleDaemon(t *testing.T, llm *llmtest.Server) (d *daemon, consoleURL string, alice, bob *client.Client) {
	t.Helper()
	llm.StartT(t)
	d = newDaemon(t)
	cfg := filepath.Join(t.TempDir(), "weir.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
tcp {
  address = "127.0.0.1:0"
  token "alice" {
    secret = %q
  }
  token "bob" {
    secret = %q
  }
}
console {
  address = "127.0.0.1:0"
}
engine {
  retry_base = "10ms"
  retry_max = "20ms"
}
plugin "llm" {
  providers = {
    local = { kind = "openai", base_url = %q }
  }
  models = {
    small = { provider = "local", model = "m-1", input_cost = %d, output_cost = %d, max_tokens = 256 }
  }
}
`, consoleAlice, consoleBob, llm.OpenAIBaseURL(), agentInputCost, agentOutputCost)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.serveArgs = []string{"--config", cfg}
	d.start("")
	d.register(consoleFlows)
	find := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(d.log())
		if m == nil {
			t.Fatalf("no %s in the daemon's log:\n%s", re, d.log())
		}
		return m[1]
	}
	consoleURL = find(`serving the console: address=(http://127\.0\.0\.1:\d+)`)
	return d, consoleURL, d.tokenClient(consoleAlice), d.tokenClient(consoleBob)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

func startAs(t *testing.T, c *client.Client, flow, input string) string {
	t.Helper()
	res, err := c.RunStart(context.Background(), apitypes.StartRequest{Flow: flow, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("start %s: %v", flow, err)
	}
	return res.RunID
}

// consolePage drives one headless Chromium against a daemon's console,
// each step bounded and retried while the live page redraws.
type consolePage struct {
	ctx   context.Context // the browser's, without a deadline
	d     *daemon
	shots string // where shot writes the screenshots
}

// openConsoleBrowser starts chromium for the test; it stops with it.
func openConsoleBrowser(t *testing.T, chromium string, d *daemon) *consolePage {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1360, 900))
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // start the browser on a context without a deadline
		t.Fatalf("starting %s: %v", chromium, err)
	}
	return &consolePage{ctx: browser, d: d, shots: t.TempDir()}
}

// do runs steps with a bound of their own, failing the test with what
// they were for.
func (p *consolePage) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\ndaemon log:\n%s", what, err, p.d.log())
	}
}

// text is the text of the element sel finds, once it has some.
func (p *consolePage) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 45*time.Second)
	defer cancel()
	q, _ := json.Marshal(sel)
	expr := `(e => e ? e.innerText : "")(document.querySelector(` + string(q) + `))`
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err == nil && s != "" {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("text of %s: %v (%v)", sel, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *consolePage) strs(t *testing.T, expr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func (p *consolePage) location(t *testing.T) string {
	t.Helper()
	u, err := chromedp.Run(p.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// shot writes the page's screenshot as name.png (and to docs/console/
// with -console-screenshots).
func (p *consolePage) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(p.shots, name+".png"), png, 0o644); err != nil {
			return err
		}
		if *consoleScreenshots {
			return os.WriteFile(filepath.Join("..", "..", "docs", "console", name+".png"), png, 0o644)
		}
		return nil
	})
}

// until waits for a JavaScript condition to hold on the page, asking
// again while the page navigates (a form's submit, a filter's reload)
// or redraws what it shows as the run changes.
func (p *consolePage) until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
			if err == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s never held: %w (last: %v, %v)", expr, ctx.Err(), ok, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

func (p *consolePage) visible(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	return p.until(`(e => !!e && e.getClientRects().length > 0)(document.querySelector(` + string(q) + `))`)
}

// click clicks the element sel finds, found and clicked in one turn of
// the page's script: a live page redraws what it shows as the run
// changes, and a node found first and clicked after may be gone.
func (p *consolePage) click(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	return p.until(`(e => !!e && (e.click(), true))(document.querySelector(` + string(q) + `))`)
}

// ready holds once the page has drawn what it shows.
func (p *consolePage) ready() chromedp.Action[chromedp.Void] {
	return p.visible(`body[data-ready="true"]`)
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// real daemon: sign-in, the run list's filters and live rows, a run
// approved, one rejected and one cancelled from their pages while the
// pages follow them live, another user's runs invisible and their URLs
// answering like missing runs, CSRF refused, and a screenshot of every
// page.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and a browser")
	}
	chromium := browserPath(t)
	llm := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: "Mailed ann.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}},
	)
	d, base, alice, bob := consoleDaemon(t, llm)

	gate1 := startAs(t, alice, "gate", `{"amount": 42}`)
	gate2 := startAs(t, alice, "gate", `{"amount": 7}`)
	echo := startAs(t, alice, "echo", `{"hello": "world"}`)
	failing := startAs(t, alice, "failing", `{}`)
	bobs := startAs(t, bob, "gate", `{}`)
	for _, id := range []string{echo, failing} {
		testutil.Eventually(t, 30*time.Second, func() error {
			r, err := alice.RunGet(context.Background(), id)
			if err != nil || !r.Phase.Terminal() {
				return fmt.Errorf("run %s not over: %v %v", id, r, err)
			}
			return nil
		})
	}

	p := openConsoleBrowser(t, chromium, d)
	browser, shots := p.ctx, p.shots
	type void = chromedp.Void
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	do, text, strs, location, shot := p.do, p.text, p.strs, p.location, p.shot
	until, visible, click, ready := p.until, p.visible, p.click, p.ready()
	rows := `[...document.querySelectorAll("#runs-table tbody tr")]`

	t.Run("sign in", func(t *testing.T) {
		do(t, "a page sends a stranger to the sign-in", chromedp.Navigate(base+"/runs"), visible(`#token`))
		if u := location(t); !strings.Contains(u, "/signin?next=%2Fruns") {
			t.Errorf("a stranger landed on %s", u)
		}
		do(t, "a wrong token is refused", chromedp.SendKeys(css(`#token`), "not-a-token-of-this-daemon"), chromedp.Submit(css(`#token`)),
			visible(`#signin-error`), shot("signin"))
		do(t, "alice signs in", chromedp.SetValue(css(`#token`), consoleAlice), chromedp.Submit(css(`#token`)), ready)
		if who, u := text(t, `#who`), location(t); who != "alice" || !strings.HasSuffix(u, "/runs") {
			t.Errorf("signed in as %q at %s", who, u)
		}
	})

	t.Run("list filters and live rows", func(t *testing.T) {
		do(t, "the list shows alice's runs", chromedp.Navigate(base+"/runs"), ready, visible(`#runs-table tr[data-run="`+failing+`"]`))
		if ids := strs(t, rows+`.map(r => r.dataset.run)`); len(ids) != 4 || strings.Contains(strings.Join(ids, " "), bobs) {
			t.Errorf("alice's list %v (bob's run %s)", ids, bobs)
		}
		do(t, "phase waiting", chromedp.Evaluate[void](`setTimeout(() => { const s = document.getElementById("phase-filter"); s.value = "waiting"; s.dispatchEvent(new Event("change")) }, 0), null`),
			until(`location.search === "?phase=waiting"`), ready, visible(`#runs-table tr[data-run="`+gate1+`"]`))
		if ph := strs(t, rows+`.map(r => r.dataset.phase)`); strings.Join(ph, ",") != "waiting,waiting" {
			t.Errorf("phase waiting shows phases %v", ph)
		}
		do(t, "flow echo", chromedp.Navigate(base+"/runs?flow=echo"), ready, visible(`#runs-table tr[data-run="`+echo+`"]`))
		if ids := strs(t, rows+`.map(r => r.dataset.run)`); strings.Join(ids, ",") != echo {
			t.Errorf("flow echo shows %v", ids)
		}
		// Searching by id opens the run; a missing id, or another
		// owner's, is answered on the list, alike.
		do(t, "search by run id", chromedp.Navigate(base+"/runs"), ready, chromedp.SetValue(css(`#run-search`), " "+failing+" "),
			click(`#run-search-form button[type="submit"]`), until(`location.pathname === "/runs/`+failing+`"`), ready,
			visible(`#run-phase .phase-failed`))
		for _, id := range []string{"run_00000000000000000000", bobs} {
			do(t, "search a run alice cannot see", chromedp.Navigate(base+"/runs"), ready, chromedp.SetValue(css(`#run-search`), id),
				click(`#run-search-form button[type="submit"]`))
			if a := text(t, `#search-answer`); a != "No run "+id+" (E_NOT_FOUND)" {
				t.Errorf("searching %s answered %q", id, a)
			}
			if u := location(t); !strings.HasSuffix(u, "/runs") {
				t.Errorf("searching %s left the list for %s", id, u)
			}
		}
		// A run started while the page is open appears without a reload.
		do(t, "open the list", chromedp.Navigate(base+"/runs"), ready, visible(`#live.on`))
		fresh := startAs(t, alice, "echo", `{"fresh": true}`)
		do(t, "a new run appears live", visible(`#runs-table tr[data-run="`+fresh+`"]`), shot("runs"))
	})

	t.Run("text filter, request ids and pages", func(t *testing.T) {
		ctx := context.Background()
		startID := func(c *client.Client, requestID string) string {
			t.Helper()
			res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "echo", Input: json.RawMessage(`{"n": 1}`), RequestID: requestID})
			if err != nil {
				t.Fatalf("start with request id %s: %v", requestID, err)
			}
			return res.RunID
		}
		// alice and bob start a run with the same request id; bob one
		// more with a request id only he used.
		mine := startID(alice, "order-shared-7")
		startID(bob, "order-shared-7")
		startID(bob, "bobs-order-9")
		filter := func(s string) chromedp.Action[void] {
			q, _ := json.Marshal(s)
			return until(`(b => !!b && (b.value = ` + string(q) + `, b.dispatchEvent(new Event("input")), true))(document.getElementById("text-filter"))`)
		}
		shown := func(t *testing.T) string {
			t.Helper()
			ids := strs(t, rows+`.map(r => r.dataset.run)`)
			slices.Sort(ids)
			return strings.Join(ids, ",")
		}
		echoes, err := alice.RunList(ctx, client.RunListParams{Flow: "echo"})
		if err != nil || len(echoes) < 2 {
			t.Fatalf("alice's echo runs: %d, %v", len(echoes), err)
		}
		var echoIDs []string
		for _, r := range echoes {
			echoIDs = append(echoIDs, r.ID)
		}
		slices.Sort(echoIDs)
		do(t, "open the list", chromedp.Navigate(base+"/runs"), ready, visible(`#runs-table tr[data-run="`+mine+`"]`))
		// The text narrows the page as it is typed, in any case: by a
		// request id (only alice's own), a flow, or a part of a run id.
		for _, tc := range []struct{ text, want string }{
			{"ORDER-shared", mine},
			{"ECHO", strings.Join(echoIDs, ",")},
			{failing[len(failing)-10:], failing},
		} {
			do(t, "filter "+tc.text, filter(tc.text), until(`new URLSearchParams(location.search).get("q") === `+jsString(tc.text)))
			testutil.Eventually(t, 10*time.Second, func() error {
				if got := shown(t); got != tc.want {
					return fmt.Errorf("text %q shows %s, want %s", tc.text, got, tc.want)
				}
				return nil
			})
		}
		do(t, "a text nothing holds", filter("zzz-nothing"), until(rows+`.length === 0`))
		if c := text(t, `#runs-count`); !strings.HasPrefix(c, "0 of ") || !strings.HasSuffix(c, "hold “zzz-nothing”") {
			t.Errorf("the count reads %q", c)
		}
		// The text is kept in the address: a reload keeps it.
		do(t, "reload with the text", chromedp.Navigate(base+"/runs?q=order-shared"), ready, visible(`#runs-table tr[data-run="`+mine+`"]`),
			until(`document.getElementById("text-filter").value === "order-shared"`))
		if got := shown(t); got != mine {
			t.Errorf("reloaded with the text, the list shows %s, want %s", got, mine)
		}

		// Find a run by the request id it was started with: alice's own,
		// never bob's, even for the request id both used.
		do(t, "search by request id", chromedp.Navigate(base+"/runs"), ready, chromedp.SetValue(css(`#run-search`), "order-shared-7"),
			click(`#run-search-form button[type="submit"]`), until(`location.pathname === "/runs/`+mine+`"`), ready,
			visible(`#run-phase .phase`))
		do(t, "search bob's request id", chromedp.Navigate(base+"/runs"), ready, chromedp.SetValue(css(`#run-search`), "bobs-order-9"),
			click(`#run-search-form button[type="submit"]`))
		if a := text(t, `#search-answer`); a != "No run bobs-order-9 (E_NOT_FOUND)" {
			t.Errorf("searching bob's request id answered %q", a)
		}
		// A text that is neither a run id nor a request id is answered
		// with the refusal.
		long := strings.Repeat("x", 300)
		do(t, "search a text too long for either", chromedp.Navigate(base+"/runs"), ready, chromedp.SetValue(css(`#run-search`), long),
			click(`#run-search-form button[type="submit"]`))
		if a := text(t, `#search-answer`); a != "Run "+long+" (E_BAD_REQUEST)" {
			t.Errorf("searching a text of 300 bytes answered %q", a)
		}

		// The list pages, newest first, as the API does.
		want, err := alice.RunList(ctx, client.RunListParams{Newest: true, Limit: 4})
		if err != nil || len(want) != 4 {
			t.Fatalf("alice's newest runs: %d, %v", len(want), err)
		}
		ids := func(t *testing.T) string { return strings.Join(strs(t, rows+`.map(r => r.dataset.run)`), ",") }
		do(t, "the first page of two", chromedp.Navigate(base+"/runs?limit=2"), ready, visible(`#runs-table tr[data-run="`+want[0].ID+`"]`), visible(`#next-page`))
		if got := ids(t); got != want[0].ID+","+want[1].ID {
			t.Errorf("the first page shows %s, want %s,%s", got, want[0].ID, want[1].ID)
		}
		do(t, "the next page", click(`#next-page`), until(`new URLSearchParams(location.search).get("before") === "`+want[1].ID+`"`), ready,
			visible(`#runs-table tr[data-run="`+want[2].ID+`"]`), visible(`#newest-page`))
		if got := ids(t); got != want[2].ID+","+want[3].ID {
			t.Errorf("the second page shows %s, want %s,%s", got, want[2].ID, want[3].ID)
		}
	})

	t.Run("approve a wait and watch the run complete", func(t *testing.T) {
		w := `.wait[data-wait="approve@1"]`
		do(t, "the run page shows the open wait and the graph waits at it",
			chromedp.Navigate(base+"/runs/"+gate1), ready, visible(w+` button.approve`),
			visible(`#graph svg g.node.waiting[data-node="approve"]`), shot("run-waiting"))
		if shown := text(t, w+` pre.shown`); !strings.Contains(shown, `"amount": 42`) || !strings.Contains(shown, `"to": "ann"`) {
			t.Errorf("the decider is shown %q", shown)
		}
		do(t, "approve with a payload; the page follows the run to its end",
			chromedp.SendKeys(css(w+` textarea.payload`), `{"by": "alice"}`), click(w+` button.approve`),
			visible(`#run-phase .phase-completed`), visible(`#graph svg g.node.visited[data-node="done"]`),
			visible(`#timeline tr[data-type="completed"]`), shot("run"))
		if n := strs(t, `[...document.querySelectorAll("#children h2")].map(h => h.textContent)`); len(n) != 0 {
			t.Errorf("a run without children shows %v", n)
		}
		if out := text(t, `#run-output`); !strings.Contains(out, `"by": "alice"`) {
			t.Errorf("output %q lacks the payload", out)
		}
	})

	t.Run("reject", func(t *testing.T) {
		w := `.wait[data-wait="approve@1"]`
		do(t, "reject with a reason", chromedp.Navigate(base+"/runs/"+gate2), ready, visible(w+` button.reject`),
			chromedp.SendKeys(css(w+` input.reason`), "amount too small"),
			until(`document.querySelector('`+w+` input.reason').value === "amount too small"`),
			click(w+` button.reject`),
			visible(`#run-phase .phase-failed`), visible(`#run-error`))
		evs, err := alice.RunEvents(context.Background(), gate2, client.EventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(evs)
		if !strings.Contains(string(b), "amount too small") {
			t.Errorf("the reason is not in the run's events: %s", b)
		}
	})

	t.Run("the timeline", func(t *testing.T) {
		ctx := context.Background()
		evs, err := alice.RunEvents(ctx, failing, client.EventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		noise := 0
		for _, ev := range evs {
			switch ev.Type {
			case "queued", "leased", "renewed", "expired", "drained", "withheld":
				noise++
			}
		}
		if noise < 2 {
			t.Fatalf("the failing run has %d lease and queue events: %+v", noise, evs)
		}
		do(t, "the failing run's timeline", chromedp.Navigate(base+"/runs/"+failing), ready,
			visible(`#timeline tr[data-type="failed"]`), until(`document.querySelectorAll("#timeline tbody tr:not(.noise-group)").length === `+fmt.Sprint(len(evs))))
		// Lease and queue events are folded, each run of them into one row
		// that counts them.
		folds := strs(t, `[...document.querySelectorAll("#timeline tr.noise-group button.fold")].map(b => b.textContent)`)
		counted := 0
		for _, f := range folds {
			var n int
			if _, err := fmt.Sscanf(f, "▸ %d lease/queue event", &n); err != nil {
				t.Errorf("a fold reads %q: %v", f, err)
			}
			counted += n
		}
		if counted != noise {
			t.Errorf("the folds %q count %d events, the run has %d", folds, counted, noise)
		}
		if shown := strs(t, `[...document.querySelectorAll("#timeline tr.noise")].filter(r => r.getClientRects().length > 0).map(r => r.dataset.type)`); len(shown) != 0 {
			t.Errorf("folded events are shown: %v", shown)
		}
		// An event's detail reads as fields, not JSON.
		if code := text(t, `#timeline tr[data-type="retry_scheduled"] dd[data-field="code"]`); code != "E_UPSTREAM" {
			t.Errorf("the retry's code field reads %q", code)
		}
		if v := text(t, `#timeline tr[data-type="accepted"] dd[data-field="request_id"]`); v != "(empty)" {
			t.Errorf("the empty request id reads %q", v)
		}
		if raw := strs(t, `[...document.querySelectorAll("#timeline tbody td:nth-child(6)")].map(td => td.innerText.trim()).filter(s => s.startsWith("{") || s.startsWith("["))`); len(raw) != 0 {
			t.Errorf("details shown as JSON: %q", raw)
		}
		first := `document.querySelector("#timeline tr.noise-group button.fold")`
		var inFirst int
		if _, err := fmt.Sscanf(folds[0], "▸ %d", &inFirst); err != nil {
			t.Fatal(err)
		}
		visibleNoise := `[...document.querySelectorAll("#timeline tr.noise")].filter(r => r.getClientRects().length > 0).length`
		do(t, "unfold the first fold", click(`#timeline tr.noise-group button.fold`),
			until(first+`.getAttribute("aria-expanded") === "true"`), until(visibleNoise+` === `+fmt.Sprint(inFirst)), shot("run-timeline"))
		do(t, "fold it again", click(`#timeline tr.noise-group button.fold`), until(visibleNoise+` === 0`))
		// Each event's detail folds.
		retry := `#timeline tr[data-type="retry_scheduled"]`
		do(t, "fold an event's detail", visible(retry+` dd[data-field="code"]`), click(retry+` details.ev-detail > summary`),
			until(`!document.querySelector('`+retry+` details.ev-detail').open`),
			until(`!document.querySelector('`+retry+` dd[data-field="code"]').checkVisibility()`))

		// A long value is cut, and shown whole on request.
		reason := strings.Repeat("the amount is far too small; ", 12)
		id := startAs(t, alice, "gate", `{"amount": 1}`)
		testutil.Eventually(t, 30*time.Second, func() error {
			_, err := alice.RunReject(ctx, id, "approve", reason)
			return err
		})
		dd := `#timeline tr[data-type="rejected"] dd[data-field="reason"]`
		do(t, "the rejection's long reason is cut", chromedp.Navigate(base+"/runs/"+id), ready, visible(dd+` .cut`))
		if cut := text(t, dd+` .cut`); cut != reason[:160]+"…" {
			t.Errorf("the cut reason reads %q", cut)
		}
		do(t, "show it whole", click(dd+` button.more`), until(`!document.querySelector('`+dd+` .cut')`))
		if whole := strs(t, `[document.querySelector('`+dd+` .str').textContent]`); len(whole) != 1 || whole[0] != reason {
			t.Errorf("the whole reason reads %q, want %q", whole, reason)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		hiddenCancel := `(e => !!e && e.hidden && e.getClientRects().length === 0)(document.getElementById("cancel"))`
		slow := startAs(t, alice, "slow", `{"ms": 600000}`)
		do(t, "cancel a running run", chromedp.Navigate(base+"/runs/"+slow), ready,
			visible(`#run-phase .phase-running`), click(`#cancel`), visible(`#run-phase .phase-cancelled`))
		if a := text(t, `#cancel-answer`); a != "cancel: requested" {
			t.Errorf("cancel answered %q", a)
		}
		// A run that ended offers no cancel: not the one just cancelled,
		// nor one that completed or failed.
		// The node the run was cancelled at is drawn cancelled, not failed;
		// a node that failed is still drawn failed.
		do(t, "the graph draws the node cancelled", visible(`#graph svg g.node.cancelled[data-node="s"]`),
			visible(`.legend .cancelled`))
		if n := strs(t, `[...document.querySelectorAll("#graph svg g.node.failed")].map(g => g.dataset.node)`); len(n) != 0 {
			t.Errorf("a cancelled run draws failed nodes %v", n)
		}
		do(t, "the cancelled run's button is gone", until(`document.getElementById("cancel").hidden`), until(hiddenCancel))
		for _, id := range []string{echo, failing} {
			do(t, "an ended run offers no cancel", chromedp.Navigate(base+"/runs/"+id), ready,
				visible(`#run-phase .phase`), until(hiddenCancel))
		}
		do(t, "a failed run's node is drawn failed", chromedp.Navigate(base+"/runs/"+failing), ready,
			visible(`#graph svg g.node.failed[data-node="f"]`))
		// A run that has not ended offers it.
		waiting := startAs(t, alice, "gate", `{}`)
		do(t, "a waiting run offers cancel", chromedp.Navigate(base+"/runs/"+waiting), ready,
			visible(`#run-phase .phase-waiting`), visible(`#cancel`))
	})

	t.Run("another user's runs are invisible", func(t *testing.T) {
		do(t, "bob's run", chromedp.Navigate(base+"/runs/"+bobs), ready)
		theirs := text(t, `#main`)
		do(t, "a missing run", chromedp.Navigate(base+"/runs/run_00000000000000000000"), ready)
		missing := text(t, `#main`)
		if !strings.Contains(theirs, "No run "+bobs) || !strings.Contains(theirs, "E_NOT_FOUND") {
			t.Errorf("bob's run page shows %q", theirs)
		}
		if strings.ReplaceAll(theirs, bobs, "X") != strings.ReplaceAll(missing, "run_00000000000000000000", "X") {
			t.Errorf("bob's run answers %q, a missing run %q", theirs, missing)
		}
		if r, err := bob.RunGet(context.Background(), bobs); err != nil || r.Phase != apitypes.PhaseWaiting {
			t.Errorf("bob's run %+v %v", r, err)
		}
	})

	t.Run("CSRF refused", func(t *testing.T) {
		victim := startAs(t, alice, "gate", `{}`)
		do(t, "open a page", chromedp.Navigate(base+"/runs"), ready)
		ctx, cancel := context.WithTimeout(browser, 45*time.Second)
		defer cancel()
		res, err := chromedp.Run(ctx, chromedp.Evaluate[[]any](`Promise.all([
		  fetch("/v1/runs/`+victim+`/cancel", {method: "POST"}).then(r => r.status),
		  fetch("/v1/runs/`+victim+`/cancel", {method: "POST", headers: {"X-Weir-CSRF": "forged"}}).then(r => r.status),
		  fetch("/v1/runs/`+victim+`/waits/approve@1/approve", {method: "POST", body: "{}"}).then(r => r.json()).then(j => j.code),
		])`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res) != "[403 403 E_CSRF]" {
			t.Errorf("refusals %v, want [403 403 E_CSRF]", res)
		}
		if r, err := alice.RunGet(context.Background(), victim); err != nil || r.Phase != apitypes.PhaseWaiting {
			t.Errorf("the refused requests changed the run: %+v %v", r, err)
		}
		// A sign-in from another origin is refused even with a good token.
		req, _ := http.NewRequest("POST", base+"/signin", strings.NewReader("token="+consoleAlice))
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("a sign-in from another origin answered %d with cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	})

	t.Run("the other pages", func(t *testing.T) {
		do(t, "flows", chromedp.Navigate(base+"/flows"), ready, visible(`#flows-table tr[data-flow="gate"]`), shot("flows"))
		do(t, "a flow", chromedp.Navigate(base+"/flows/gate"), ready, visible(`#graph svg g.node[data-node="approve"]`), shot("flow"))
		vs, err := alice.FlowVersions(context.Background(), "gate")
		if err != nil || len(vs) != 1 {
			t.Fatalf("versions of gate: %+v %v", vs, err)
		}
		do(t, "a version by its hash", chromedp.Navigate(base+"/flows/gate?version="+vs[0].Hash), ready,
			visible(`#versions-table tr.selected[data-version="1"]`), visible(`#graph svg g.node[data-node="approve"]`))
		if src := text(t, `pre.source`); !strings.Contains(src, `wait("approve"`) {
			t.Errorf("the flow's source shows %q", src)
		}
		do(t, "dead letters", chromedp.Navigate(base+"/deadletters"), ready, visible(`#deadletters-table`), shot("deadletters"))
		if dl := text(t, `#deadletters-table`); !strings.Contains(dl, "E_UPSTREAM") || !strings.Contains(dl, "attempt 2") {
			t.Errorf("dead letters show %q", dl)
		}
		// The failing run ended on its error wire: redriving its dead
		// letter, confirmed, is refused with the way out (a fork), and
		// the letter stays listed.
		do(t, "redrive a dead letter", chromedp.Evaluate[void](`window.confirm = () => true; document.querySelector("#deadletters-table button.redrive").click(), null`))
		if ans := text(t, `#redrive-answer`); !strings.Contains(ans, "0 redriven, 1 refused") || !strings.Contains(ans, "E_RUN_ENDED") || !strings.Contains(ans, "fork") {
			t.Errorf("the redrive answered %q", ans)
		}
		if dl := text(t, `#deadletters-table`); !strings.Contains(dl, "E_UPSTREAM") {
			t.Errorf("after a refused redrive the dead letters show %q", dl)
		}
		do(t, "status", chromedp.Navigate(base+"/status"), ready, visible(`#history #chart-tasks svg polyline.series`), shot("status"))
		if adm := text(t, `#admission`); adm != "open" {
			t.Errorf("admission %q", adm)
		}
		// A signed-in user sees its own owner row, never another's.
		if ow := text(t, `#owners-table`); !strings.Contains(ow, "alice") || strings.Contains(ow, "bob") {
			t.Errorf("owners table shows %q", ow)
		}
	})
	t.Run("a fan-out's children mature live", func(t *testing.T) {
		parent := startAs(t, alice, "review", `{}`)
		do(t, "the cohort panel shows three children in flight", chromedp.Navigate(base+"/runs/"+parent), ready,
			until(`(r => !!r && r.cells[5].textContent === "3")(document.querySelector('#cohorts tr[data-node="each"]'))`),
			visible(`.wait[data-kind="cohort"]`))
		var kids []string
		testutil.Eventually(t, 30*time.Second, func() error {
			runs, err := alice.RunList(context.Background(), client.RunListParams{Phase: apitypes.PhaseWaiting})
			if err != nil {
				return err
			}
			kids = kids[:0]
			for _, r := range runs {
				if r.Parent == parent {
					kids = append(kids, r.ID)
				}
			}
			if len(kids) != 3 {
				return fmt.Errorf("%d children waiting", len(kids))
			}
			return nil
		})
		// The API lists a run's children by its parent, to its owner only.
		if got, err := alice.RunList(context.Background(), client.RunListParams{Parent: parent}); err != nil || len(got) != 3 {
			t.Errorf("alice's children of %s: %d runs, %v", parent, len(got), err)
		}
		if got, err := bob.RunList(context.Background(), client.RunListParams{Parent: parent}); err != nil || len(got) != 0 {
			t.Errorf("bob sees %d children of alice's run, %v", len(got), err)
		}
		do(t, "the list links each child to its parent", chromedp.Navigate(base+"/runs"), ready,
			until(`document.querySelectorAll('#runs-table td:nth-child(5) a[href="/runs/`+parent+`"]').length === 3`))
		do(t, "a child links back to its parent and the node that started it", chromedp.Navigate(base+"/runs/"+kids[0]), ready,
			visible(`#parent-run a[href="/runs/`+parent+`"]`))
		if p := text(t, `#parent-run`); p != parent+" at node each" {
			t.Errorf("the child's parent reads %q", p)
		}
		do(t, "back to the parent, which lists its children", chromedp.Navigate(base+"/runs/"+parent), ready, visible(`#cohorts`),
			until(`document.querySelectorAll("#children-table tbody tr").length === 3`), shot("run-fanout"))
		if got := strs(t, `[...document.querySelectorAll("#children-table tbody tr")].map(r => r.dataset.run + " " + r.cells[1].textContent)`); len(got) != 3 {
			t.Errorf("children %v", got)
		} else {
			for _, k := range kids {
				if !slices.Contains(got, k+" each") {
					t.Errorf("children %v lack %s at node each", got, k)
				}
			}
		}
		for _, k := range kids {
			if _, err := alice.RunApprove(context.Background(), k, "approve", json.RawMessage(`true`)); err != nil {
				t.Fatal(err)
			}
		}
		do(t, "the parent completes live with every child mature",
			visible(`#run-phase .phase-completed`),
			until(`(r => !!r && r.cells[6].textContent === "3 / 3")(document.querySelector('#cohorts tr[data-node="each"]'))`),
			until(`document.querySelectorAll('#children-table tbody tr[data-phase="completed"]').length === 3`))
	})
	t.Run("approve an agent's proposed tool call, edited", func(t *testing.T) {
		id := startAs(t, alice, "mailer", `{}`)
		w := `.wait[data-wait="a@1.1.0"]`
		do(t, "the proposal shows the tool and its arguments", chromedp.Navigate(base+"/runs/"+id), ready,
			visible(w+`[data-kind="approval"] button.approve`))
		if shown := text(t, w); !strings.Contains(shown, "mail.send") || !strings.Contains(shown, `"to": "ann@example.com"`) {
			t.Errorf("the decider is shown %q", shown)
		}
		if d.outbox() != 0 {
			t.Fatal("the mail went out before anyone approved it")
		}
		if n := strs(t, `[String(document.querySelectorAll('`+w+` textarea.payload').length)]`); len(n) != 1 || n[0] != "0" {
			t.Errorf("an agent's approval offers a payload (%v): it would not be taken", n)
		}
		ws, err := alice.RunWaits(context.Background(), id)
		var shown struct{ Digest string }
		if err != nil || len(ws) != 1 || json.Unmarshal(ws[0].Shown, &shown) != nil || len(shown.Digest) != 64 {
			t.Fatalf("the open approval %+v %v: want one showing a digest", ws, err)
		}
		want := shown.Digest
		if d := text(t, w+` .digest`); d != want {
			t.Errorf("the page shows the digest %q, want %s", d, want)
		}
		if args := strs(t, `[document.querySelector('`+w+` textarea.arguments').value]`); len(args) != 1 || !strings.Contains(args[0], `"to": "ann@example.com"`) {
			t.Errorf("the arguments offered for editing are %q, want the proposal's", args)
		}
		do(t, "edit the arguments and approve; the agent's turns appear live",
			chromedp.SetValue(css(w+` textarea.arguments`), `{"to": "eve@example.com", "body": "edited"}`), click(w+` button.approve`),
			visible(`#run-phase .phase-completed`),
			until(`document.querySelectorAll("#agent-turns tbody tr").length === 2`),
			visible(`#agents tr[data-node="a"]`), shot("run-agent"))
		if turns := text(t, `#agent-turns`); !strings.Contains(turns, "mail.send") || !strings.Contains(turns, "100") {
			t.Errorf("agent turns show %q", turns)
		}
		if n := d.outbox(); n != 1 {
			t.Errorf("outbox has %d mails, want 1", n)
		}
		// The decision named the proposal the page showed.
		evs, err := alice.RunEvents(context.Background(), id, client.EventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var seen []any
		for _, e := range evs {
			if e.Type == "approved" {
				seen = append(seen, e.Detail["digest"], e.Detail["edited"])
			}
		}
		if len(seen) != 2 || seen[0] != want || seen[1] != true {
			t.Errorf("the approval journaled %v, want the shown proposal's digest %s, edited", seen, want)
		}
		if b, err := os.ReadFile(filepath.Join(d.data, "plugin-state", "mail", "outbox.jsonl")); err != nil || !strings.Contains(string(b), `"to":"eve@example.com"`) {
			t.Errorf("outbox %s (%v): want the mail with the edit", b, err)
		}
	})
	t.Logf("screenshots in %s", shots)
	d.stop()
}

// recoveryFlows go wrong on purpose: asking's send (testkit.once) has its
// effect and its plugin dies before the answer, every time, and its probe
// cannot tell, so the run parks on an unknown wait; flaky's tool fails
// both its tries, and the run parks on the exhaustion.
const recoveryFlows = `
flow(name = "asking", nodes = [
    task("send", tool = "testkit.once", args = {"value": "hi", "crash": True, "probe": "unknown"},
         at_most_once = True, on_unknown = "ask", next = "after"),
    task("after", tool = "testkit.echo", args = lambda ctx: {"sent": ctx.results["send"], "input": ctx.input}),
])
flow(name = "flaky", nodes = [task("f", tool = "testkit.fail", args = {"times": 2, "code": "E_UPSTREAM"}, retries = 1, on_exhausted = "park")])
`

// TestConsoleRecoveryInBrowser drives the recovery operations from a run's
// page in headless Chromium against a real daemon: an unknown outcome
// resolved "did not happen" (the call is made again, and parks again) and
// then "happened" with a result (the run completes with it), a result that
// is not JSON refused in the page; an exhausted task redriven to
// completion; the completed run forked from a node picked on its graph to
// the new run's page, a fork that would repeat the send refused with the
// API's E_FORK_EFFECTS as the API words it, and the lineage linked both
// ways.
func TestConsoleRecoveryInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and a browser")
	}
	chromium := browserPath(t)
	d, base, alice, bob := consoleDaemon(t, llmtest.New())
	ctx := context.Background()
	if res, err := alice.FlowRegister(ctx, apitypes.SourceFile{Path: "recovery.star", Src: recoveryFlows}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %+v %v", res, err)
	}
	p := openConsoleBrowser(t, chromium, d)
	ready := p.ready()
	confirmAll := chromedp.Evaluate[chromedp.Void](`window.confirm = () => true, null`)
	p.do(t, "alice signs in", chromedp.Navigate(base+"/runs"), p.visible(`#token`),
		chromedp.SetValue(chromedp.CSS(`#token`), consoleAlice), chromedp.Submit(chromedp.CSS(`#token`)), ready)
	waitingOn := func(id, wait string) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			r, err := alice.RunGet(ctx, id)
			if err != nil || r.Phase != apitypes.PhaseWaiting || len(r.Waits) != 1 || r.Waits[0].ID != wait {
				return fmt.Errorf("run %s: %+v %v, want waiting on %s", id, r, err, wait)
			}
			return nil
		})
	}
	asking := startAs(t, alice, "asking", `{"n": 1}`)

	t.Run("resolve an unknown outcome", func(t *testing.T) {
		waitingOn(asking, "send@1.unknown.1")
		w := `.wait[data-wait="send@1.unknown.1"][data-kind="unknown"]`
		p.do(t, "the run page offers both answers", chromedp.Navigate(base+"/runs/"+asking), ready,
			p.visible(w+` button.happened`), p.visible(w+` button.not-happened`), p.shot("run-unknown"))
		if shown := p.text(t, w); !strings.Contains(shown, "testkit.once") || !strings.Contains(shown, `"value": "hi"`) || !strings.Contains(shown, asking+"/send/1") {
			t.Errorf("the unknown wait shows %q", shown)
		}
		p.do(t, "a result that is not JSON is refused in the page", p.click(w+` button.happened`), p.visible(w+` textarea.result`),
			chromedp.SendKeys(chromedp.CSS(w+` textarea.result`), `{"id": `), p.click(w+` button.confirm-happened`))
		if a := p.text(t, w+` .resolve-answer`); !strings.HasPrefix(a, "The result is not JSON") {
			t.Errorf("a result that is not JSON answered %q", a)
		}
		if l := p.text(t, w+` .happened-form label`); !strings.Contains(l, "ok wire") {
			t.Errorf("a task's happened form says %q, want what the result does (the node goes on along its ok wire)", l)
		}
		if r, err := alice.RunGet(ctx, asking); err != nil || len(r.Waits) != 1 || r.Waits[0].ID != "send@1.unknown.1" {
			t.Fatalf("the refused result changed the run: %+v %v", r, err)
		}
		p.do(t, "did not happen, with a reason: the call is made again and parks again", confirmAll,
			chromedp.SendKeys(chromedp.CSS(w+` input.reason`), "not in the log"),
			p.until(`document.querySelector('`+w+` input.reason').value === "not in the log"`),
			p.click(w+` button.not-happened`), p.visible(`#timeline tr[data-type="resolved"]`),
			p.visible(`.wait[data-wait="send@1.unknown.2"] button.happened`), p.until(`!document.querySelector('`+w+`')`))
		if n := d.onceEffects(); n != 2 {
			t.Errorf("%d sends, want 2: the first and the one made again after did not happen", n)
		}
		w2 := `.wait[data-wait="send@1.unknown.2"]`
		p.do(t, "happened, with a result: the run completes with it", p.click(w2+` button.happened`),
			chromedp.SendKeys(chromedp.CSS(w2+` textarea.result`), `{"id": "msg-42"}`), chromedp.SetValue(chromedp.CSS(w2+` input.reason`), "in the outbox"),
			p.click(w2+` button.confirm-happened`),
			p.visible(`#run-phase .phase-completed`))
		if out := p.text(t, `#run-output`); !strings.Contains(out, `"id": "msg-42"`) {
			t.Errorf("the run's output %q lacks the result", out)
		}
		evs, err := alice.RunEvents(ctx, asking, client.EventListParams{})
		if err != nil {
			t.Fatal(err)
		}
		var answers []string
		for _, e := range evs {
			if e.Type == "resolved" {
				answers = append(answers, fmt.Sprint(e.Detail["happened"], " ", e.Detail["by"], " ", e.Detail["reason"]))
			}
		}
		if strings.Join(answers, "; ") != "false alice not in the log; true alice in the outbox" {
			t.Errorf("resolved events %q", answers)
		}
		if n := d.onceEffects(); n != 2 {
			t.Errorf("%d sends after happened, want still 2", n)
		}
	})

	t.Run("redrive an exhausted task", func(t *testing.T) {
		flaky := startAs(t, alice, "flaky", `{}`)
		waitingOn(flaky, "f@1.exhausted.1")
		w := `.wait[data-wait="f@1.exhausted.1"][data-kind="exhausted"]`
		p.do(t, "the run page offers a redrive", chromedp.Navigate(base+"/runs/"+flaky), ready, p.visible(w+` button.redrive`))
		if shown := p.text(t, w); !strings.Contains(shown, "testkit.fail failed all 2 tries") || !strings.Contains(shown, "E_RETRIES_EXHAUSTED") {
			t.Errorf("the exhausted wait shows %q", shown)
		}
		p.do(t, "redrive: the third try gets through", confirmAll, p.click(w+` button.redrive`), p.visible(`#run-phase .phase-completed`),
			p.visible(`#timeline tr[data-type="redriven"]`))
	})

	t.Run("fork a finished run", func(t *testing.T) {
		p.do(t, "the finished run offers a fork", chromedp.Navigate(base+"/runs/"+asking), ready, p.visible(`#run-phase .phase-completed`),
			p.visible(`#fork-open`), p.until(`[...document.querySelectorAll("#fork-point option")].map(o => o.value).join() === "send@1,after@1"`))
		// A fork from the send would send again: refused, as the API says.
		_, apiErr := alice.Fork(ctx, asking, apitypes.ForkRequest{From: "send@1"})
		var ae *client.Error
		if !errors.As(apiErr, &ae) || ae.Code != apitypes.CodeForkEffects {
			t.Fatalf("the API's fork from send@1: %v", apiErr)
		}
		p.do(t, "a fork from the send", p.click(`#fork-open`), p.visible(`#fork-point`),
			chromedp.SetValue(chromedp.CSS(`#fork-point`), "send@1"), p.click(`#fork-go`))
		if a := p.text(t, `#fork-answer`); a != ae.Code+": "+ae.Message {
			t.Errorf("the page says %q, the API %q", a, ae.Code+": "+ae.Message)
		}
		p.do(t, "an input that is not JSON is refused in the page", chromedp.SetValue(chromedp.CSS(`#fork-input`), `{"n": `),
			p.click(`#fork-go`), p.until(`document.getElementById("fork-answer").textContent.startsWith("The input is not JSON")`))
		if fam, err := alice.RunLineage(ctx, asking); err != nil || len(fam) != 1 {
			t.Fatalf("refused forks made runs: %+v %v", fam, err)
		}
		p.do(t, "pick the after node on the graph; fork with a new input to the new run's page",
			// An SVG element has no click(): the click is dispatched.
			p.until(`(g => !!g && (g.dispatchEvent(new MouseEvent("click", {bubbles: true})), true))(document.querySelector('#graph svg g.node[data-node="after"]'))`),
			p.until(`document.getElementById("fork-point").value === "after@1"`),
			chromedp.SetValue(chromedp.CSS(`#fork-input`), `{"n": 2}`), chromedp.SetValue(chromedp.CSS(`#fork-reason`), "from the page"),
			p.click(`#fork-go`), p.until(`location.pathname !== "/runs/`+asking+`"`), ready,
			p.visible(`#forked-from a[href="/runs/`+asking+`"]`), p.visible(`#run-phase .phase-completed`), p.shot("run-forked"))
		fork := strings.TrimPrefix(p.strs(t, `[location.pathname]`)[0], "/runs/")
		v, err := alice.RunGet(ctx, fork)
		var out struct {
			Sent  struct{ ID string }
			Input struct{ N int }
		}
		if err != nil || v.ForkedFrom == nil || *v.ForkedFrom != (apitypes.ForkRef{RunID: asking, Node: "after", Visit: 1}) ||
			json.Unmarshal(v.Output, &out) != nil || out.Input.N != 2 || out.Sent.ID != "msg-42" {
			t.Fatalf("the fork %s: %+v %s %v", fork, v, v.Output, err)
		}
		if f := p.text(t, `#forked-from`); f != "Forked from "+asking+" at after@1" {
			t.Errorf("the fork's lineage reads %q", f)
		}
		if n := d.onceEffects(); n != 2 {
			t.Errorf("%d sends after the fork, want still 2: the send's result was copied", n)
		}
		p.do(t, "the source lists its fork", chromedp.Navigate(base+"/runs/"+asking), ready,
			p.visible(`#forks li[data-run="`+fork+`"] a[href="/runs/`+fork+`"]`))
	})

	t.Run("operate a schedule", func(t *testing.T) {
		// Hourly from the epoch: no tick comes due while the test runs.
		if res, err := alice.FlowRegister(ctx, apitypes.SourceFile{Path: "hourly.star", Src: `schedule("hourly", flow = "flaky", every = "1h")`}); err != nil || len(res.Schedules) != 1 {
			t.Fatalf("register: %+v %v", res, err)
		}
		row := `#schedules-table tr[data-schedule="hourly"]`
		p.do(t, "the schedules page lists it", chromedp.Navigate(base+"/schedules"), ready, confirmAll, p.visible(row+` button.schedule-pause`), p.shot("schedules"))
		if shown := p.text(t, row); !strings.Contains(shown, "every 1h0m0s") || !strings.Contains(shown, "none yet") {
			t.Errorf("the schedule's row reads %q", shown)
		}
		p.do(t, "pause", p.click(row+` button.schedule-pause`), p.visible(row+` button.schedule-resume`))
		if s, err := alice.Schedule(ctx, "hourly"); err != nil || !s.Paused || s.PauseReason != "paused from the console" {
			t.Fatalf("after pause: %+v %v", s, err)
		}
		p.do(t, "fire now", p.click(row+` button.schedule-trigger`), p.until(`document.getElementById("schedule-answer").textContent.includes("fired: run ")`))
		run := strings.TrimPrefix(p.text(t, `#schedule-answer`), "schedule hourly fired: run ")
		if v, err := alice.RunGet(ctx, run); err != nil || v.StartedBy != "schedule:hourly" {
			t.Fatalf("the fired run %q: %+v %v", run, v, err)
		}
		p.do(t, "resume", p.click(row+` button.schedule-resume`), p.visible(row+` button.schedule-pause`))
		if s, err := alice.Schedule(ctx, "hourly"); err != nil || s.Paused {
			t.Fatalf("after resume: %+v %v", s, err)
		}
	})

	t.Run("events and triggers", func(t *testing.T) {
		src := `on_event("ping.sent", flow = "flaky", name = "on_ping", filter = lambda ev: ev["payload"].get("go", False))`
		if res, err := alice.FlowRegister(ctx, apitypes.SourceFile{Path: "ping.star", Src: src}); err != nil || len(res.Triggers) != 1 {
			t.Fatalf("register: %+v %v", res, err)
		}
		started, err := alice.SendEvent(ctx, apitypes.EventSendRequest{ID: "p-1", Name: "ping.sent", Key: "k", Payload: json.RawMessage(`{"go": true}`)})
		if err != nil || len(started.Started) != 1 || started.Started[0].RunID == "" {
			t.Fatalf("the first ping: %+v %v", started, err)
		}
		if _, err := alice.SendEvent(ctx, apitypes.EventSendRequest{ID: "p-2", Name: "ping.sent", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		run := started.Started[0].RunID
		trow := `#triggers-table tr[data-trigger="on_ping"]`
		p.do(t, "the events page lists the trigger and both events", chromedp.Navigate(base+"/events"), ready, confirmAll,
			p.visible(trow+` button.trigger-rm`), p.visible(`#events-table tr[data-event="p-1"] a[href="/runs/`+run+`"]`), p.shot("events"))
		if shown := p.text(t, `#events-table tr[data-event="p-2"]`); !strings.Contains(shown, "on_ping skipped: filtered out") || !strings.Contains(shown, "kept for a wait") {
			t.Errorf("the filtered event's row reads %q", shown)
		}
		if shown := p.text(t, trow); !strings.Contains(shown, "ping.sent") || !strings.Contains(shown, "ping.star:1") {
			t.Errorf("the trigger's row reads %q", shown)
		}
		p.do(t, "remove the trigger", p.click(trow+` button.trigger-rm`),
			p.until(`document.getElementById("event-answer").textContent === "trigger on_ping removed"`))
		if ts, err := alice.Triggers(ctx, 0); err != nil || len(ts) != 0 {
			t.Fatalf("after remove: %+v %v", ts, err)
		}
		// Bob sees none of alice's events.
		if evs, err := bob.Events(ctx, client.EventListOptions{}); err != nil || len(evs) != 0 {
			t.Fatalf("bob's events: %+v %v", evs, err)
		}
	})
	d.stop()
}
