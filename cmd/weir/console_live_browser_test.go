package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// streamRequests records the run streams a page asks for, with the
// Last-Event-ID each carried (in the headers as sent, which come in an
// event of their own).
type streamRequests struct {
	mu   sync.Mutex
	seen []*streamRequest
	byID map[network.RequestID]*streamRequest
}

type streamRequest struct{ uri, lastEventID string }

func (s *streamRequests) listen(t *testing.T, p *consolePage) {
	t.Helper()
	s.byID = map[network.RequestID]*streamRequest{}
	lastEventID := func(h network.Headers) string {
		for k, v := range h {
			if strings.EqualFold(k, "Last-Event-ID") {
				return fmt.Sprint(v)
			}
		}
		return ""
	}
	if err := chromedp.Listen(p.ctx, func(ev any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if u, err := url.Parse(e.Request.URL); err == nil && strings.HasSuffix(u.Path, "/stream") {
				r := &streamRequest{uri: u.RequestURI(), lastEventID: lastEventID(e.Request.Headers)}
				s.seen = append(s.seen, r)
				s.byID[e.RequestID] = r
			}
		case *network.EventRequestWillBeSentExtraInfo:
			if r := s.byID[e.RequestID]; r != nil && r.lastEventID == "" {
				r.lastEventID = lastEventID(e.Headers)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// of returns the requests for run id's stream, each as its path and
// query, then " last=" and its Last-Event-ID if it sent one.
func (s *streamRequests) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.seen {
		if strings.HasPrefix(r.uri, "/v1/runs/"+id+"/stream") {
			line := r.uri
			if r.lastEventID != "" {
				line += " last=" + r.lastEventID
			}
			out = append(out, line)
		}
	}
	return out
}

// cutProxy forwards TCP connections to a server until cut closes every
// one it holds; it goes on forwarding new ones.
type cutProxy struct {
	url   string
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{url: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			wg.Go(func() { _, _ = io.Copy(c, s); c.Close() })
		}
	})
	return p
}

// cut closes the connections the proxy holds.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestConsoleLiveTurnInBrowser drives a run's page in headless Chromium
// against a real daemon and the scripted model server: an ended run's
// page asks for no turn text; an agent's page, open while its run waits
// for an approval, shows the next turn's text as the provider streams it
// (held after its first piece), naming the node and turn, as text — the
// model's answer holds markup that must never become elements; the page
// reloaded, and its stream cut by the network and connected again with
// its last id, shows the same text once; when the provider goes on, the
// whole answer arrives and, once the turn is journaled, the live turn goes
// and the turn shows in the agent's turns. Another owner's run answers
// its deltas stream as a missing one.
func TestConsoleLiveTurnInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and a browser")
	}
	chromium := browserPath(t)
	const first = `<img/src="x"/onerror="window.pwned=1"> `
	const said = first + `The Seine <img src=x onerror="window.pwned=2"> flows 777 km & more.`
	hold := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	defer release()
	llm := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: said, Hold: hold, Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 12}},
	)
	d, base, alice, bob := consoleDaemon(t, llm)
	ctx := context.Background()
	p := openConsoleBrowser(t, chromium, d)
	var streams streamRequests
	streams.listen(t, p)
	ready := p.ready()
	p.do(t, "alice signs in", chromedp.Navigate(base+"/runs"), p.visible(`#token`),
		chromedp.SetValue(chromedp.CSS(`#token`), consoleAlice), chromedp.Submit(chromedp.CSS(`#token`)), ready)

	t.Run("an ended run's page asks for no turn text", func(t *testing.T) {
		echo := startAs(t, alice, "echo", `{"n": 1}`)
		testutil.Eventually(t, 30*time.Second, func() error {
			if r, err := alice.RunGet(ctx, echo); err != nil || !r.Phase.Terminal() {
				return fmt.Errorf("run %s: %+v %v", echo, r, err)
			}
			return nil
		})
		p.do(t, "the ended run's page", chromedp.Navigate(base+"/runs/"+echo), ready, p.visible(`#run-phase .phase-completed`),
			p.until(`document.getElementById("live").textContent === "ended"`))
		if got := streams.of(echo); len(got) != 1 || strings.Contains(got[0], "deltas") {
			t.Errorf("the ended run's page asked for %q, want its stream once, without deltas", got)
		}
	})

	id := startAs(t, alice, "mailer", `{}`)
	testutil.Eventually(t, 60*time.Second, func() error {
		if r, err := alice.RunGet(ctx, id); err != nil || len(r.Waits) != 1 || r.Waits[0].ID != "a@1.1.0" {
			return fmt.Errorf("run %s: %+v %v, want waiting on a@1.1.0", id, r, err)
		}
		return nil
	})
	turn := `#live-turns .live-turn[data-turn="a@1.2"]`
	liveText := `(e => e ? e.textContent : null)(document.querySelector('` + turn + ` pre.live-text'))`
	noMarkup := `document.querySelectorAll("#main img").length === 0 && window.pwned === undefined`

	t.Run("the turn's text arrives as text", func(t *testing.T) {
		p.do(t, "the agent's page, open before the turn", chromedp.Navigate(base+"/runs/"+id), ready,
			p.visible(`.wait[data-wait="a@1.1.0"] button.approve`), p.visible(`#live.on`))
		if got := streams.of(id); len(got) != 1 || !strings.Contains(got[0], "deltas=1") {
			t.Fatalf("the running run's page asked for %q, want its stream with deltas=1", got)
		}
		if _, err := alice.RunApprove(ctx, id, "a@1.1.0", nil); err != nil {
			t.Fatal(err)
		}
		p.do(t, "the held turn's first piece shows", p.visible(turn), p.until(liveText+` === `+jsString(first)), p.shot("run-live-turn"))
		if head := p.text(t, turn+` .live-head`); !strings.Contains(head, "a@1") || !strings.Contains(head, "turn 2") {
			t.Errorf("the live turn is headed %q, want its node, visit and turn", head)
		}
		if ok := p.strs(t, `[String(`+noMarkup+`)]`); ok[0] != "true" {
			t.Errorf("the model's markup became elements")
		}
	})

	t.Run("a page opened again shows the turn so far", func(t *testing.T) {
		p.do(t, "reload", chromedp.Reload(), ready, p.visible(turn), p.until(liveText+` === `+jsString(first)))
	})

	// The page through a proxy that cuts its connections: the browser
	// connects again by itself, with the last message's id.
	cut := newCutProxy(t, strings.TrimPrefix(base, "http://"))
	t.Run("a stream cut by the network resumes from its last id", func(t *testing.T) {
		p.do(t, "the page through the proxy", chromedp.Navigate(cut.url+"/runs/"+id), ready, p.visible(`#live.on`),
			p.until(liveText+` === `+jsString(first)))
		before := len(streams.of(id))
		cut.cut()
		p.do(t, "the stream is cut and connected again", p.until(`!document.getElementById("live").classList.contains("on")`),
			p.visible(`#live.on`), p.until(liveText+` === `+jsString(first)))
		got := streams.of(id)
		if len(got) <= before {
			t.Fatalf("no stream asked for again after the cut: %q", got)
		}
		// The browser's reconnect carries the last id it saw; on a loaded
		// machine it may also have retried once before the proxy let it
		// through, so the resume is any request since the cut.
		resumed := false
		for _, again := range got[before:] {
			resumed = resumed || strings.Contains(again, "deltas=1") && strings.Contains(again, "/a@1.2/")
		}
		if !resumed {
			t.Errorf("the stream was asked for again as %q, want deltas from its last id, in turn a@1.2", got[before:])
		}
	})

	t.Run("the whole answer, then the journaled turn", func(t *testing.T) {
		// Every text the live turn's text holds as it grows (read from the
		// text itself, which outlives the turn's view), and every element
		// put into it.
		p.do(t, "watch the live turn", chromedp.Evaluate[chromedp.Void](`(() => {
		  window.liveSeen = []; window.liveElements = 0;
		  new MutationObserver((ms) => {
		    for (const m of ms) {
		      if (m.type === "characterData") window.liveSeen.push(m.target.data);
		      for (const n of m.addedNodes) if (n.nodeType === 1 && n.closest("pre.live-text")) window.liveElements++;
		    }
		  }).observe(document.getElementById("live-turns"), {childList: true, subtree: true, characterData: true});
		})(), null`))
		release()
		p.do(t, "the turn is journaled and the live turn goes", p.visible(`#run-phase .phase-completed`),
			p.until(`document.querySelectorAll("#agent-turns tbody tr").length === 2`),
			p.until(`!document.querySelector("#live-turns .live-turn") && document.getElementById("live-turns").hidden`))
		seen := p.strs(t, `window.liveSeen`)
		if len(seen) == 0 || seen[len(seen)-1] != said {
			t.Errorf("the live turn showed %q, want its text to grow to the whole answer %q", seen, said)
		}
		for i, s := range seen {
			if !strings.HasPrefix(said, s) || (i > 0 && !strings.HasPrefix(s, seen[i-1])) {
				t.Errorf("the live turn showed %q after %q: want the answer's start, growing", s, seen[max(0, i-1)])
				break
			}
		}
		if n := p.strs(t, `[String(window.liveElements), String(`+noMarkup+`)]`); n[0] != "0" || n[1] != "true" {
			t.Errorf("elements put into the live text: %s; no markup: %s", n[0], n[1])
		}
		v, err := alice.RunGet(ctx, id)
		if err != nil || v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("run %s: %+v %v", id, v, err)
		}
		if o := agentResult(t, v); o.Answer != said {
			t.Errorf("the journaled answer %q, the provider said %q", o.Answer, said)
		}
	})

	t.Run("another owner's deltas answer like a missing run", func(t *testing.T) {
		bobs := startAs(t, bob, "gate", `{}`)
		fetch := func(run string) string {
			return `fetch("/v1/runs/` + run + `/stream?deltas=1").then(r => r.json().then(j => r.status + " " + j.code + " " + j.message.replaceAll("` + run + `", "X")))`
		}
		res, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`Promise.all([`+fetch(bobs)+`, `+fetch("run_00000000000000000000")+`])`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(res[0], "404 E_NOT_FOUND") || res[0] != res[1] {
			t.Errorf("bob's run's deltas answered %q, a missing run %q", res[0], res[1])
		}
	})
	d.stop()
}
