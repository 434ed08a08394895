package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/internal/proclimit"
	"github.com/weirhq/weir/runtime/sandbox"
)

// testMemory is small enough that a bomb reaches it at once and large
// enough for an ordinary evaluation.
const testMemory = 256 << 20

func newPool(t testing.TB, cfg sandbox.Config) *sandbox.Pool {
	t.Helper()
	if !proclimit.Supported {
		t.Skip("the sandbox's limits are enforced on Linux only")
	}
	if cfg.Memory == 0 {
		cfg.Memory = testMemory
	}
	// The weir binary, not this race-instrumented test binary: the
	// memory cap is what is tested.
	cfg.Command = []string{testutil.WeirBinary(t)}
	p, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func file(path, src string) flows.File { return flows.File{Path: path, Src: []byte(src)} }

var catalog = flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}

const okFlow = `flow(name = "ok", nodes = [task("a", tool = "t.idem", args = lambda ctx: {"n": 1})])`

func analyzeOK(t *testing.T, p *sandbox.Pool) {
	t.Helper()
	m, ds, err := p.Analyze(context.Background(), flows.AnalyzeRequest{Files: []flows.File{file("ok.star", okFlow)}, Tools: catalog, Full: true})
	if err != nil || len(ds) != 0 || m.Flow("ok") == nil {
		t.Fatalf("after the bomb, an ordinary flow: module %v, diags %q, err %v", m, ds, err)
	}
}

// Each bomb ends as E_SCRIPT_LIMIT naming its limit, and the next
// registration evaluates normally: only the bomb's worker died. Without
// the sandbox each of these took the process down or held it for minutes.
func TestRegistrationBombsKillOnlyTheirWorker(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1, Timeout: 5 * time.Second})
	tests := []struct {
		name  string
		src   string
		limit flows.Limit
	}{
		{"a list of 2^29 elements", "x = [0] * (1 << 29)", flows.LimitMemory},
		{"a string of a GiB", `x = "a" * ((1 << 30) - 1)`, flows.LimitMemory},
		{"deep JSON", `x = json.decode("[" * 50000000)`, flows.LimitDepth},
		// ~5e10 steps of Go that Starlark counts as one.
		{"a quadratic format", "x = []\nfor i in range(300000):\n    x = [x]\ny = \"%s\" % [x]", flows.LimitTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ds, err := p.Analyze(context.Background(), flows.AnalyzeRequest{Files: []flows.File{file("bomb.star", tt.src)}, Tools: catalog, Full: true})
			if err != nil {
				t.Fatal(err)
			}
			want := "script limit (" + string(tt.limit) + ")"
			if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || !strings.Contains(ds[0].Message, want) || ds[0].File != "bomb.star" {
				t.Fatalf("got %q, want one E_SCRIPT_LIMIT in bomb.star containing %q", ds, want)
			}
			analyzeOK(t, p)
		})
	}
	if s := p.Stats(); s.Killed[flows.LimitMemory] != 2 || s.Killed[flows.LimitTime] != 1 {
		t.Errorf("killed workers by limit: %v, want 2 memory and 1 time", s.Killed)
	}
}

// With several files, the limit is reported on the file whose script was
// running when the worker died, a file it load()s included.
func TestRegistrationLimitNamesTheFile(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1})
	files := []flows.File{
		file("a.star", `flow(name = "a", nodes = [task("x", tool = "t.idem")])`),
		file("b.star", "load(\"lib/big.star\", \"x\")\n"),
		file("lib/big.star", "x = [0] * (1 << 29)\n"),
		file("c.star", `flow(name = "c", nodes = [task("x", tool = "t.idem")])`),
	}
	_, ds, err := p.Analyze(context.Background(), flows.AnalyzeRequest{Files: files, Tools: catalog, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Code != flows.CodeScriptLimit || ds[0].File != "lib/big.star" {
		t.Fatalf("got %q, want one E_SCRIPT_LIMIT on lib/big.star", ds)
	}
	t.Log(ds[0].Message)
}

// A worker's registration answers match the in-process ones, lookups of
// tools and registered flows included.
func TestAnalyzeMatchesInProcess(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1})
	registered := &flows.Flow{Name: "leaf", MaxDepth: 8, Entry: "x", Nodes: []*flows.Node{{ID: "x", Kind: flows.KindTask, Tool: "t.idem"}}}
	req := flows.AnalyzeRequest{
		Files: []flows.File{
			file("a.star", "load(\"lib.star\", \"h\")\nflow(name = \"a\", nodes = [task(\"x\", tool = \"t.idem\", args = h, next = \"s\"), subflow(\"s\", flow = \"leaf\", next = \"y\"), task(\"y\", tool = \"t.idm\")])\n"),
			file("lib.star", "def h(ctx):\n    return {}\n"),
		},
		Tools: catalog, Full: true,
		Lookup: func(name string) (*flows.Flow, error) {
			if name == "leaf" {
				return registered, nil
			}
			return nil, nil
		},
	}
	local, lds, lerr := script.Local{}.Analyze(context.Background(), req)
	remote, rds, rerr := p.Analyze(context.Background(), req)
	if lerr != nil || rerr != nil {
		t.Fatal(lerr, rerr)
	}
	if !reflect.DeepEqual(lds, rds) || len(rds) != 1 || !strings.Contains(rds[0].Message, `did you mean "t.idem"`) {
		t.Fatalf("diagnostics: in process %q, in the sandbox %q", lds, rds)
	}
	if len(remote.Flows) != 1 || remote.Flows[0].Hash != local.Flows[0].Hash || len(remote.Sources("a")) != 2 {
		t.Fatalf("module: %+v", remote)
	}
	if d, ok := remote.Depth("a"); !ok || d != 1 {
		t.Fatalf("depth of a: %d %v", d, ok)
	}

	lookupFailed := errors.New("store down")
	req.Lookup = func(string) (*flows.Flow, error) { return nil, lookupFailed }
	if _, _, err := p.Analyze(context.Background(), req); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Fatalf("a failed lookup: %v", err)
	}
}

// The files of one registration compile on several threads in the
// worker; the module and the diagnostics are still the in-process ones,
// in the same order, syntax errors in some files included.
func TestAnalyzeManyFilesMatchesInProcess(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1})
	var files []flows.File
	for i := range 40 {
		src := fmt.Sprintf("flow(name = \"f%d\", nodes = [task(\"x\", tool = \"t.idem\")])\n", i)
		if i%13 == 5 {
			src = fmt.Sprintf("flow(name = \"f%d\", nodes = [task(\"x\", tool = \"t.idem\"\n", i)
		}
		files = append(files, file(fmt.Sprintf("f%02d.star", i), src))
	}
	req := flows.AnalyzeRequest{Files: files, Tools: catalog, Full: true}
	local, lds, lerr := script.Local{}.Analyze(context.Background(), req)
	remote, rds, rerr := p.Analyze(context.Background(), req)
	if lerr != nil || rerr != nil {
		t.Fatal(lerr, rerr)
	}
	if !reflect.DeepEqual(lds, rds) || len(rds) != 3 || rds[0].Code != flows.CodeSyntax {
		t.Fatalf("diagnostics: in process %q, in the sandbox %q", lds, rds)
	}
	if len(remote.Flows) != 37 || len(remote.Flows) != len(local.Flows) {
		t.Fatalf("%d flows in the sandbox, %d in process", len(remote.Flows), len(local.Flows))
	}
	for i, f := range remote.Flows {
		if f.Hash != local.Flows[i].Hash {
			t.Fatalf("flow %d: %s in the sandbox, %s in process", i, f.Name, local.Flows[i].Name)
		}
	}
}

// callFiles are callFlow's sources.
var callFiles = []flows.File{file("c.star", callFlow)}

const callFlow = `
def args(ctx, item):
    return {"item": item, "run": ctx.run_id, "n": ctx.input["n"] + 1, "prev": ctx.results["a"], "f": 0.5, "big": 1 << 60}
def bomb(ctx):
    return {"x": [0] * (1 << 29)}
def big(ctx):
    return {"x": "a" * 2000000}
def hot(ctx):
    s = "a" * (1 << 20)
    n = 0
    for i in range(1000000):
        for j in range(1000000):
            n += hash(s)
    return {}
def spin(ctx):
    n = 0
    for i in range(1000000):
        for j in range(1000000):
            n += 1
    return {}
flow(name = "c", nodes = [
    task("a", tool = "t.idem", args = bomb, next = "b"),
    task("b", tool = "t.idem", args = spin, next = "g"),
    task("g", tool = "t.idem", args = big, next = "h"),
    task("h", tool = "t.idem", args = hot, next = "f"),
    fanout("f", tool = "t.idem", items = lambda ctx: [1, 2], args = args, width = 2, depth = 1, max_items = 2),
])
`

func callSources(loads *atomic.Int32) flows.Sources {
	files := []flows.File{file("c.star", callFlow)}
	return flows.Sources{Hash: flows.HashSources(files), Load: func(context.Context) ([]flows.File, error) {
		loads.Add(1)
		return files, nil
	}}
}

// A step's callables go to a worker in one round trip and come back as
// the in-process evaluator returns them; the worker asks for the sources
// once and keeps them.
func TestCallBatchesAndMatchesInProcess(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1})
	var loads atomic.Int32
	src := callSources(&loads)
	c := flows.Context{RunID: "r1", Attempt: 2, Input: map[string]any{"n": int64(41)}, Results: map[string]any{"a": map[string]any{"ok": true}}}
	ref := flows.CallableRef{Flow: "c", Node: "f", Param: "args"}
	calls := []flows.Call{{Ref: ref, Args: []any{"x"}}, {Ref: ref, Args: []any{int64(7)}}, {Ref: flows.CallableRef{Flow: "c", Node: "f", Param: "items"}}}
	want, err := script.Local{}.Call(context.Background(), src, c, calls)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Stats().Requests
	for range 2 {
		got, err := p.Call(context.Background(), src, c, calls)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sandbox %#v\nin process %#v", got, want)
		}
	}
	if n := p.Stats().Requests - before; n != 2 {
		t.Errorf("two batches of three calls took %d round trips", n)
	}
	if n := loads.Load(); n != 2 { // once for Local, once for the worker
		t.Errorf("sources loaded %d times", n)
	}
}

// A bomb in a callable fails that call with its limit; the steps limit
// stays what it was, and the pool serves the next call.
func TestCallBombsAreScriptLimits(t *testing.T) {
	// A deadline far past what 10,000,000 steps take on a loaded machine:
	// the step limit must be what ends the spin.
	p := newPool(t, sandbox.Config{Workers: 1, Timeout: time.Minute})
	var loads atomic.Int32
	src := callSources(&loads)
	for node, want := range map[string]flows.Limit{"a": flows.LimitMemory, "b": flows.LimitSteps} {
		res, err := p.Call(context.Background(), src, flows.Context{RunID: "r"}, []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: node, Param: "args"}}})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		if !errors.Is(err, flows.ErrScriptLimit) || flows.LimitOf(err) != want {
			t.Errorf("node %s: got %v, want script limit %s", node, err, want)
		}
	}
	res, err := p.Call(context.Background(), src, flows.Context{RunID: "r"}, []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "f", Param: "items"}}})
	if err != nil || res[0].Err != nil || !reflect.DeepEqual(res[0].Value, []any{int64(1), int64(2)}) {
		t.Fatalf("after the bombs: %v %v", res, err)
	}
}

// A request larger than MaxMessageBytes is refused before it is sent.
func TestOversizedRequestIsASizeLimit(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1, MaxMessageBytes: 1 << 20})
	var loads atomic.Int32
	big := strings.Repeat("x", 1<<20)
	_, err := p.Call(context.Background(), callSources(&loads), flows.Context{RunID: "r", Input: big},
		[]flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "f", Param: "items"}}})
	if flows.LimitOf(err) != flows.LimitSize {
		t.Fatalf("got %v, want the size limit", err)
	}
	if s := p.Stats(); s.Started != 1 || len(s.Killed) != 0 {
		t.Errorf("the refusal should cost no worker: %+v", s)
	}
	// An answer over the bound is read no further: its worker goes.
	res, err := p.Call(context.Background(), callSources(&loads), flows.Context{RunID: "r"},
		[]flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "g", Param: "args"}}})
	if flows.LimitOf(err) != flows.LimitSize {
		t.Fatalf("a 2 MB answer: got %v %v, want the size limit", res, err)
	}
	res, err = p.Call(context.Background(), callSources(&loads), flows.Context{RunID: "r"},
		[]flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "f", Param: "items"}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("the next call: %v %v", res, err)
	}
}

// How a worker died tells the limit: the Go runtime's fatal error on its
// stderr, or the signal that ended it. A worker stands in here that dies
// as the Go runtime does, since every recursion a script can reach is
// refused before the stack overflows (flows' nesting limits).
func TestWorkerDeathsNameTheirLimit(t *testing.T) {
	tests := []struct {
		name, script string
		limit        flows.Limit
	}{
		{"stack overflow", "echo 'runtime: goroutine stack exceeds 67108864-byte limit' >&2; echo 'fatal error: stack overflow' >&2; exit 2", flows.LimitDepth},
		{"out of memory", "echo 'fatal error: runtime: out of memory' >&2; exit 2", flows.LimitMemory},
		{"CPU time", "kill -XCPU $$", flows.LimitTime},
		{"the OOM killer", "kill -KILL $$", flows.LimitMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sandbox.New(sandbox.Config{Workers: 1, Command: []string{"/bin/sh", "-c", "head -c 4 >/dev/null; " + tt.script}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			_, _, err = p.Analyze(context.Background(), flows.AnalyzeRequest{Files: []flows.File{file("a.star", okFlow)}})
			if flows.LimitOf(err) != "" {
				t.Fatalf("Analyze returns a limit as a diagnostic, got error %v", err)
			}
			var loads atomic.Int32
			_, err = p.Call(context.Background(), callSources(&loads), flows.Context{}, []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "a", Param: "args"}}})
			if flows.LimitOf(err) != tt.limit {
				t.Fatalf("got %v, want the %s limit", err, tt.limit)
			}
		})
	}
}

// queueBehind starts one Call that holds the pool's only worker (its
// sources load until release is closed), then n more, and returns once
// those n wait in line. Each answer arrives on its channel, the first at
// index 0.
func queueBehind(t *testing.T, p *sandbox.Pool, release chan struct{}, calls func(i int) (flows.Context, []flows.Call)) []chan error {
	t.Helper()
	return queueBehindOwners(t, p, release, 1, func(i int) (string, flows.Context, []flows.Call) {
		c, cs := calls(i)
		return "", c, cs
	})
}

// queueBehindOwners is queueBehind with each Call's owner, and the first
// holders Calls each holding a worker of their own.
func queueBehindOwners(t *testing.T, p *sandbox.Pool, release chan struct{}, holders int, calls func(i int) (string, flows.Context, []flows.Call)) []chan error {
	t.Helper()
	files := callFiles
	var loads atomic.Int32
	entered := make(chan struct{}, holders)
	src := flows.Sources{Hash: flows.HashSources(files), Load: func(context.Context) ([]flows.File, error) {
		if loads.Add(1) <= int32(holders) { // each new worker asks once
			entered <- struct{}{}
			<-release
		}
		return files, nil
	}}
	var n int
	for ; ; n++ {
		if _, _, cs := calls(n); cs == nil {
			break
		}
	}
	answers := make([]chan error, n)
	start := func(i int) {
		answers[i] = make(chan error, 1)
		who, c, cs := calls(i)
		go func() {
			got, err := p.Call(owner.WithOwner(context.Background(), who), src, c, cs)
			switch {
			case err != nil:
				answers[i] <- err
			case len(got) == 1 && got[0].Err != nil:
				answers[i] <- got[0].Err
			default:
				want, err := script.Local{}.Call(context.Background(), src, c, cs)
				if err == nil && !reflect.DeepEqual(got, want) {
					err = fmt.Errorf("sandbox %#v, in process %#v", got, want)
				}
				answers[i] <- err
			}
		}()
	}
	for i := range holders {
		start(i)
		<-entered
	}
	for i := holders; i < n; i++ {
		start(i)
	}
	testutil.Eventually(t, time.Minute, func() error {
		if w := sandbox.WaitingCalls(p); w != n-holders {
			return fmt.Errorf("%d calls wait, want %d", w, n-holders)
		}
		return nil
	})
	return answers
}

// argsCall is call i of the fan-out's args callable, with a ctx of its own.
func argsCall(i int) (flows.Context, []flows.Call) {
	return flows.Context{RunID: fmt.Sprint("r", i), Attempt: 1, Input: map[string]any{"n": int64(i)}, Results: map[string]any{"a": i}},
		[]flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "f", Param: "args"}, Args: []any{int64(i)}}}
}

// Calls that wait for a busy worker go in one round trip when it frees,
// MaxBatch at a time, and each gets the answer of its own ctx.
func TestWaitingCallsShareARoundTrip(t *testing.T) {
	for _, tt := range []struct {
		maxBatch, trips int
	}{{0, 2}, {3, 4}, {1, 9}} {
		t.Run(fmt.Sprint("max batch ", tt.maxBatch), func(t *testing.T) {
			p := newPool(t, sandbox.Config{Workers: 1, MaxBatch: tt.maxBatch})
			release := make(chan struct{})
			if tt.maxBatch == 1 {
				// Nothing waits in line: each Call takes a worker itself.
				close(release)
				for i := range 9 {
					c, cs := argsCall(i)
					if _, err := p.Call(context.Background(), callSources(new(atomic.Int32)), c, cs); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				answers := queueBehind(t, p, release, func(i int) (flows.Context, []flows.Call) {
					if i == 9 {
						return flows.Context{}, nil
					}
					return argsCall(i)
				})
				close(release)
				for i, a := range answers {
					if err := <-a; err != nil {
						t.Errorf("call %d: %v", i, err)
					}
				}
			}
			if s := p.Stats(); s.Calls != 9 || s.Requests != tt.trips || s.Rerun != 0 {
				t.Errorf("stats %+v, want 9 calls in %d round trips", s, tt.trips)
			}
		})
	}
}

// A bomb in a batch kills the batch's worker; every Call of the batch is
// then evaluated alone, so the bomb fails with its own limit and the
// others answer as if it had not been there.
func TestBombInABatchFailsOnlyItself(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1, Timeout: time.Minute})
	const bomb = 3
	release := make(chan struct{})
	answers := queueBehind(t, p, release, func(i int) (flows.Context, []flows.Call) {
		switch {
		case i == bomb:
			return flows.Context{RunID: "bomb"}, []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "a", Param: "args"}}}
		case i > 5:
			return flows.Context{}, nil
		}
		return argsCall(i)
	})
	close(release)
	for i, a := range answers {
		err := <-a
		if i == bomb {
			if flows.LimitOf(err) != flows.LimitMemory {
				t.Errorf("the bomb: got %v, want the memory limit", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("call %d beside the bomb: %v", i, err)
		}
	}
	// The first call alone, the batch of five, then the five alone.
	if s := p.Stats(); s.Calls != 6 || s.Requests != 7 || s.Rerun != 5 || s.Killed[flows.LimitMemory] != 2 {
		t.Errorf("stats %+v", s)
	}
}

// Schedules, triggers and event waits cross the process boundary with the
// module, and their callables (refs with a Decl, called with the tick or
// the event alone) evaluate in a worker as in process.
func TestDeclsMatchInProcess(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1})
	files := []flows.File{
		file("d.star", `flow(name = "d", nodes = [wait("w", event = "ticket.updated", match = lambda ctx: ctx.input["t"])], input = {"type": "object"})
schedule("daily", flow = "d", cron = "0 9 * * *", timezone = "Europe/Paris", input = lambda tick: {"at": tick["time"]})
on_event("ticket.created", flow = "d", filter = lambda ev: ev["key"] == "T-1")
`),
	}
	req := flows.AnalyzeRequest{Files: files, Tools: catalog, Full: true}
	local, lds, lerr := script.Local{}.Analyze(context.Background(), req)
	remote, rds, rerr := p.Analyze(context.Background(), req)
	if lerr != nil || rerr != nil || len(lds) > 0 || len(rds) > 0 {
		t.Fatal(lerr, rerr, lds, rds)
	}
	if len(remote.Schedules) != 1 || len(remote.Triggers) != 1 {
		t.Fatalf("module from the sandbox: %d schedules, %d triggers", len(remote.Schedules), len(remote.Triggers))
	}
	ls, rs := *local.Schedules[0], *remote.Schedules[0]
	ls.Site = nil
	if !reflect.DeepEqual(ls, rs) || remote.Flow("d").Node("w").Event != "ticket.updated" {
		t.Fatalf("schedule in process %+v, from the sandbox %+v", ls, rs)
	}
	sources := remote.DeclSources(rs.Decl())
	src := flows.Sources{Hash: rs.SourceHash, Load: func(context.Context) ([]flows.File, error) { return sources, nil }}
	tick := map[string]any{"time": "2026-12-01T09:00:00+01:00", "schedule": "daily"}
	ev := map[string]any{"name": "ticket.created", "id": "e1", "key": "T-1", "payload": map[string]any{}}
	calls := []flows.Call{{Ref: *rs.InputFn, Args: []any{tick}}, {Ref: *remote.Triggers[0].Filter, Args: []any{ev}}}
	want, err := script.Local{}.Call(context.Background(), src, flows.Context{}, calls)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Call(context.Background(), src, flows.Context{}, calls)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("sandbox %#v (%v)\nin process %#v", got, err, want)
	}
	if want[0].Err != nil || !reflect.DeepEqual(want[0].Value, map[string]any{"at": "2026-12-01T09:00:00+01:00"}) || want[1].Value != true {
		t.Fatalf("in process %#v", want)
	}
}
