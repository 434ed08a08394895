package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// An upgrade fixture is a data directory written by a release of weir with
// runs parked on every kind of wait, kept as a tarball (Badger's files are
// mostly preallocated zeros) beside a manifest naming its runs, in a
// directory of testdata/upgrade named after the release. Every release
// adds its own. TestMakeUpgradeFixture writes one; TestUpgradeResumesParkedRuns
// opens each with this tree and drives every parked run to its end. That
// test must stay green in every later release, or that release adds a
// migration (docs/releasing.md).
var makeUpgradeFixture = flag.String("make-upgrade-fixture", "",
	"TestMakeUpgradeFixture writes testdata/upgrade/`NAME` from this tree")

const (
	upgradeFixtures = "testdata/upgrade"
	upgradeData     = "data.tar.gz"
	upgradeManifest = "runs.json"
	// upgradeOwner owns every run of the fixture: it is a token's owner on
	// the daemon's TCP listener, so the runs do not belong to whichever OS
	// user made the fixture.
	upgradeOwner  = "upgrader"
	upgradeSecret = "upgrade-token-0123456789"
)

// upgradeFlows are the fixture's flows. A child of a subflow or a fan-out
// parks on the same human wait as a root run; no wait has a timeout, so
// the fixture's age never decides anything.
const upgradeFlows = `
flow(name = "up_gate", nodes = [
    wait("ok", next = "go"),
    task("go", tool = "testkit.echo", args = lambda ctx: {"approved": ctx.results["ok"], "input": ctx.input}),
])
flow(name = "up_parent", nodes = [
    subflow("call", flow = "up_gate", args = lambda ctx: {"from": "parent"}, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"child": ctx.results["call"]}),
])
flow(name = "up_fan", nodes = [
    fanout("each", items = lambda ctx: ctx.input["items"], flow = "up_gate", width = 2, depth = 1, max_items = 8, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"all": ctx.results["each"]}),
])
flow(name = "up_agent", nodes = [
    agent("a", model = "small", prompt = "Mail ann", tools = ["mail.send"], approve = ["mail.send"], max_turns = 3),
])
flow(name = "up_tools", nodes = [
    fanout("each", items = lambda ctx: ctx.input["ms"], tool = "testkit.sleep", args = lambda ctx, item: {"ms": item},
           width = 3, depth = 1, max_items = 8, quorum = 0.6, next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"all": ctx.results["each"]}),
])
flow(name = "up_echo", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"x": ctx.input["x"]})])
`

// upgradeRuns is the manifest: the fixture's run ids by role.
type upgradeRuns struct {
	Release string `json:"release"` // the commit the fixture was made from, for people
	// Parked on a human wait; a parent whose child is; a fan-out whose
	// first child finished and whose other two are parked; an agent whose
	// proposed call waits for approval.
	Gate   string `json:"gate"`
	Parent string `json:"parent"`
	Fan    string `json:"fan"`
	Agent  string `json:"agent"`
	// A fan-out of tool calls frozen by its quorum, whose last child was
	// still sleeping when the daemon stopped: the drain gave its task
	// back to the queue, and the cohort's grace is over after the upgrade.
	Tools string `json:"tools"`
	// Completed before the upgrade.
	Echo     string `json:"echo"`
	GateDone string `json:"gate_done"`
}

// upgradeDaemon is a daemon whose runs belong to upgradeOwner (its API
// client speaks TCP with that owner's token) and whose llm plugin talks to
// srv.
func upgradeDaemon(t *testing.T, srv *llmtest.Server) *daemon {
	t.Helper()
	srv.StartT(t)
	d := newDaemon(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d.config = fmt.Sprintf(`tcp {
  address = %q
  token %q {
    secret = %q
  }
}
plugin "llm" {
  providers = {
    local = { kind = "openai", base_url = %q }
  }
  models = {
    small = { provider = "local", model = "m-1", input_cost = %d, output_cost = %d, max_tokens = 256 }
  }
}
`, addr, upgradeOwner, upgradeSecret, srv.OpenAIBaseURL(), agentInputCost, agentOutputCost)
	api, err := client.New("http://"+addr, client.WithToken(upgradeSecret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	d.api = api
	return d
}

// TestMakeUpgradeFixture writes an upgrade fixture from this tree. It
// runs only with -make-upgrade-fixture (docs/releasing.md):
//
//	go test ./cmd/weir -run TestMakeUpgradeFixture -make-upgrade-fixture vX.Y.Z
func TestMakeUpgradeFixture(t *testing.T) {
	if *makeUpgradeFixture == "" {
		t.Skip("writes testdata/upgrade/NAME: run with -make-upgrade-fixture NAME")
	}
	dir := filepath.Join(upgradeFixtures, *makeUpgradeFixture)
	if !filepath.IsLocal(*makeUpgradeFixture) || strings.ContainsRune(*makeUpgradeFixture, filepath.Separator) {
		t.Fatalf("-make-upgrade-fixture %q: want a directory name", *makeUpgradeFixture)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists: a release's fixture is never rewritten (docs/releasing.md)", dir)
	}
	ctx := context.Background()
	srv := llmtest.New(llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}})
	d := upgradeDaemon(t, srv)
	d.start("")
	d.register(upgradeFlows)
	start := func(flow, input string) string {
		t.Helper()
		res, err := d.startRun(flow, input, "")
		if err != nil {
			t.Fatalf("start %s: %v", flow, err)
		}
		return res.RunID
	}
	var m upgradeRuns
	m.Echo = start("up_echo", `{"x":1}`)
	m.GateDone = start("up_gate", `{"n":0}`)
	m.Gate = start("up_gate", `{"n":1}`)
	m.Parent = start("up_parent", `{}`)
	m.Fan = start("up_fan", `{"items":["a","b","c"]}`)
	m.Agent = start("up_agent", `{}`)

	waitsOf := func(id string, n int) []apitypes.HumanWait {
		t.Helper()
		var ws []apitypes.HumanWait
		testutil.Eventually(t, 30*time.Second, func() error {
			var err error
			if ws, err = d.api.RunWaits(ctx, id); err != nil {
				return err
			}
			ws = slices.DeleteFunc(ws, func(w apitypes.HumanWait) bool { return !w.NeedsDecision() })
			if len(ws) != n {
				return fmt.Errorf("run %s has %d decisions open, want %d: %+v\n%s", id, len(ws), n, ws, d.log())
			}
			return nil
		})
		return ws
	}
	waitsOf(m.GateDone, 1)
	if _, err := d.api.RunApprove(ctx, m.GateDone, "ok", json.RawMessage(`{"by":"before"}`)); err != nil {
		t.Fatal(err)
	}
	// The fan-out's first child is approved and finishes; the third is
	// then admitted and parks beside the second.
	var first apitypes.HumanWait
	for _, w := range waitsOf(m.Fan, 2) {
		v, err := d.api.RunGet(ctx, w.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if string(v.Input) == `{"item":"a"}` {
			first = w
		}
	}
	if first.RunID == "" {
		t.Fatal("no fan-out child of item a is waiting")
	}
	if _, err := d.api.RunApprove(ctx, first.RunID, first.ID, json.RawMessage(`{"by":"before"}`)); err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(first.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("first fan-out child %s %+v", v.Phase, v.Error)
	}
	waitsOf(m.Fan, 2)
	waitsOf(m.Gate, 1)
	waitsOf(m.Parent, 1)
	waitsOf(m.Agent, 1)
	for _, id := range []string{m.Echo, m.GateDone} {
		if v := d.waitTerminal(id); v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("run %s %s %+v", id, v.Phase, v.Error)
		}
	}
	for _, id := range []string{m.Gate, m.Parent, m.Fan, m.Agent} {
		testutil.Eventually(t, 30*time.Second, func() error {
			v, err := d.api.RunGet(ctx, id)
			if err == nil && v.Phase != apitypes.PhaseWaiting {
				err = fmt.Errorf("run %s is %s, want waiting", id, v.Phase)
			}
			return err
		})
	}
	// Last, as the cohort's grace (30s from its freeze) must not pass
	// before the stop.
	m.Tools = start("up_tools", `{"ms":[0,0,3600000]}`)
	testutil.Eventually(t, 20*time.Second, func() error {
		v, err := d.api.RunGet(ctx, m.Tools)
		if err != nil {
			return err
		}
		if v.Progress == nil || len(v.Progress.Cohorts) != 1 {
			return fmt.Errorf("run %s %s has no cohort yet", m.Tools, v.Phase)
		}
		if c := v.Progress.Cohorts[0]; c.State != "frozen" || c.Mature != 2 || c.InFlight != 1 {
			return fmt.Errorf("cohort %+v, want frozen with 2 mature and 1 in flight", c)
		}
		return nil
	})
	d.stop()

	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	m.Release = strings.TrimSpace(string(out))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := packDir(d.data, filepath.Join(dir, upgradeData)); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, upgradeManifest), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeResumesParkedRuns opens each fixture's data directory,
// written by an earlier release, with a daemon of this tree and drives
// every parked run to its end: the human wait, the subflow's parked child,
// the fan-out's parked children, and the agent's proposed call, which is
// then sent and answered by the model. The completed runs read as they
// were. If this test fails after a change to a persisted format, the
// change needs a migration, not a new fixture.
func TestUpgradeResumesParkedRuns(t *testing.T) {
	e2e(t, "starts real daemons")
	dirs, err := os.ReadDir(upgradeFixtures)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no fixture in %s", upgradeFixtures)
	}
	for _, e := range dirs {
		t.Run(e.Name(), func(t *testing.T) {
			t.Parallel()
			upgradeFrom(t, filepath.Join(upgradeFixtures, e.Name()))
		})
	}
}

// upgradeFrom is TestUpgradeResumesParkedRuns for the fixture in dir.
func upgradeFrom(t *testing.T, dir string) {
	ctx := context.Background()
	var m upgradeRuns
	b, err := os.ReadFile(filepath.Join(dir, upgradeManifest))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(llmtest.Step{Text: "Mailed ann.", Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 5}})
	d := upgradeDaemon(t, srv)
	if err := unpackDir(filepath.Join(dir, upgradeData), d.data); err != nil {
		t.Fatal(err)
	}
	d.start("")

	for id, want := range map[string]string{m.Echo: `{"x":1}`, m.GateDone: `"by":"before"`} {
		v, err := d.api.RunGet(ctx, id)
		if err != nil || v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), want) {
			t.Fatalf("completed run %s after the upgrade: %v %+v, want output with %s", id, err, v, want)
		}
	}

	// approveAll approves every decision open under a root run, its
	// descendants' included, until the root ends.
	approveAll := func(root string) *apitypes.Run {
		t.Helper()
		approved := 0
		testutil.Eventually(t, 60*time.Second, func() error {
			v, err := d.api.RunGet(ctx, root)
			if err != nil {
				return err
			}
			if v.Phase.Terminal() {
				return nil
			}
			ws, err := d.api.RunWaits(ctx, root)
			if err != nil {
				return err
			}
			for _, w := range ws {
				if !w.NeedsDecision() {
					continue
				}
				var payload json.RawMessage
				if w.Kind == apitypes.WaitHuman {
					payload = json.RawMessage(`{"by":"after"}`) // an agent's approval takes none
				}
				if _, err := d.api.RunApprove(ctx, w.RunID, w.ID, payload); err != nil {
					return fmt.Errorf("approve %s of %s: %v", w.ID, w.RunID, err)
				}
				approved++
			}
			return fmt.Errorf("run %s is %s after %d approvals\n%s", root, v.Phase, approved, d.log())
		})
		v, err := d.api.RunGet(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if v.Phase != apitypes.PhaseCompleted {
			t.Fatalf("run %s (%s) ended %s %+v", root, v.Flow, v.Phase, v.Error)
		}
		return v
	}

	if v := approveAll(m.Gate); !strings.Contains(string(v.Output), `"approved":{"by":"after"}`) || !strings.Contains(string(v.Output), `"n":1`) {
		t.Errorf("gate output %s", v.Output)
	}
	if v := approveAll(m.Parent); !strings.Contains(string(v.Output), `"child":{"approved":{"by":"after"},"input":{"from":"parent"}}`) {
		t.Errorf("parent output %s", v.Output)
	}
	v := approveAll(m.Fan)
	var fan struct {
		All struct {
			Results []struct {
				Approved struct{ By string }   `json:"approved"`
				Input    struct{ Item string } `json:"input"`
			} `json:"results"`
			Sufficient bool `json:"sufficient"`
		} `json:"all"`
	}
	if err := json.Unmarshal(v.Output, &fan); err != nil {
		t.Fatalf("fan output %s: %v", v.Output, err)
	}
	var got []string
	for _, r := range fan.All.Results {
		got = append(got, r.Input.Item+":"+r.Approved.By)
	}
	if !fan.All.Sufficient || !slices.Equal(got, []string{"a:before", "b:after", "c:after"}) {
		t.Errorf("fan-out results %v sufficient %v, want a:before b:after c:after: %s", got, fan.All.Sufficient, v.Output)
	}
	v = approveAll(m.Tools)
	var tools struct {
		All struct {
			Results    []struct{ MS *int64 } `json:"results"`
			Sufficient bool                  `json:"sufficient"`
		} `json:"all"`
	}
	if err := json.Unmarshal(v.Output, &tools); err != nil || len(tools.All.Results) != 2 || !tools.All.Sufficient {
		t.Errorf("tool fan-out output %s (%v), want the 2 short sleeps' results, sufficient", v.Output, err)
	}
	if c := v.Progress.Cohorts; len(c) != 1 || c[0].Stopped != 1 || c[0].Mature != 2 {
		t.Errorf("tool fan-out cohort %+v, want the long sleep stopped after the grace", c)
	}
	if o := agentResult(t, approveAll(m.Agent)); o.Answer != "Mailed ann." || o.Turns != 2 {
		t.Errorf("agent result %+v", o)
	}
	if n := d.outbox(); n != 1 {
		t.Errorf("outbox has %d mails, want the one approved after the upgrade", n)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "ann@example.com") {
		t.Errorf("the model was asked %d times after the upgrade, want once with the call's outcome", len(reqs))
	}

	runs, err := client.Collect(d.api.RunListAll(ctx, client.RunListParams{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Phase != apitypes.PhaseCompleted {
			t.Errorf("run %s (%s) is %s after the upgrade", r.ID, r.Flow, r.Phase)
		}
	}
	if len(runs) != 11 {
		t.Errorf("%d runs after the upgrade, want the fixture's 11 (7 roots, 1 subflow child, 3 fan-out children)", len(runs))
	}
	d.stop()
}

// packDir writes the files under dir to a gzip'd tarball at path.
func packDir(dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.ModTime = time.Time{}
		hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = "", "", 0, 0
		if err := tw.WriteHeader(hdr); err != nil || !info.Mode().IsRegular() {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// unpackDir extracts the tarball at path into dir.
func unpackDir(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("%s: entry %q leaves the directory", path, hdr.Name)
		}
		p := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, hdr.FileInfo().Mode().Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q is neither a file nor a directory", path, hdr.Name)
		}
	}
}
