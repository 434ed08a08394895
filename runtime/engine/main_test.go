package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

func TestMain(m *testing.M) {
	sandbox.ServeIfWorker() // this binary is the sandbox's worker in tests that use one
	testutil.Main(m, testutil.Plugins("testkit", "mail"))
}

// waitTimeout bounds every wait on a condition: generous, because it only
// limits how long a failing test hangs on a loaded machine.
const waitTimeout = time.Minute

// bundle is an engine under test with its collaborators. The integration
// layer (setup) fills host and dataDir; the unit layer (setupUnit, in
// unit_test.go) wraps a bundle in a testBundle.
type bundle struct {
	eng     *Engine
	st      store.Store
	host    *host.Host
	dataDir string
}

// setup starts an engine over a real Badger and a real plugin host with the
// testkit and mail plugins, registers src, and stops everything at the end.
func setup(t testing.TB, cfg Config, src string) *bundle {
	t.Helper()
	b := &bundle{dataDir: t.TempDir()}
	plugins := filepath.Join(b.dataDir, "plugins")
	for _, name := range []string{"testkit", "mail"} {
		if _, err := host.Install(plugins, testutil.Plugin(t, name), nil); err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
	}
	st, err := badgerstore.Open(filepath.Join(b.dataDir, "store"), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.st = st
	t.Cleanup(func() { b.st.Close() }) // the store the bundle has then: a test may reopen it
	if b.host, err = host.New(host.Config{PluginsDir: plugins, DataDir: b.dataDir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.host.Close() })
	cfg.Store = b.st
	if w, ok := cfg.Tools.(toolsWrapper); ok {
		w.wrap(b.host) // the test sees every call on its way to the real host
	} else {
		cfg.Tools = b.host
	}
	if cfg.Tick == 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Millisecond
	}
	b.eng = openEngine(t, cfg, src)
	return b
}

// restart stops the bundle's engine, closes and reopens its Badger, and
// opens a new engine on it with cfg (Store, Tools and a Tick filled in):
// a daemon started again over the same data.
func (b *bundle) restart(t testing.TB, cfg Config) {
	t.Helper()
	if err := b.eng.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.st.Close()
	st, err := badgerstore.Open(filepath.Join(b.dataDir, "store"), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.st = st
	cfg.Store, cfg.Tools = st, b.host
	if cfg.Tick == 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	b.eng = openEngine(t, cfg, "")
}

// toolsWrapper is a Config.Tools a test passes to setup to stand between
// the engine and the real plugin host.
type toolsWrapper interface {
	Tools
	wrap(Tools)
}

// openEngine opens an engine on cfg, registers src and starts it; the
// engine is stopped at the end of the test, before what it runs on is
// closed.
func openEngine(t testing.TB, cfg Config, src string) *Engine {
	t.Helper()
	eng, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if src != "" {
		res, err := eng.Register(context.Background(), []SourceFile{{Path: "test.star", Src: src}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diagnostics) > 0 {
			t.Fatalf("registering test flow:\n%s", res.Diagnostics)
		}
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		eng.Stop(ctx)
	})
	return eng
}

// start submits a run as owner "alice".
func (b *bundle) start(t testing.TB, flow, input, requestID string) string {
	t.Helper()
	res, err := b.eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: flow, Input: json.RawMessage(input), RequestID: requestID})
	if err != nil {
		t.Fatalf("submit %s: %v", flow, err)
	}
	return res.RunID
}

// wait polls the store until the run satisfies cond, failing the test if
// it does not within waitTimeout.
func (b *bundle) wait(t testing.TB, id string, what string, cond func(*store.Run) bool) *store.Run {
	t.Helper()
	var run *store.Run
	testutil.Eventually(t, waitTimeout, func() error {
		r, err := b.eng.Get(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		run = r
		if cond(r) {
			return nil
		}
		return fmt.Errorf("run %s never became %s; last phase %s error %+v", id, what, r.Phase, r.Error)
	})
	return run
}

func (b *bundle) waitTerminal(t testing.TB, id string) *store.Run {
	return b.wait(t, id, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
}

// oneOpenWait waits until alice's run id has one open wait, want, and
// answers it.
func oneOpenWait(t *testing.T, eng *Engine, id, want string) HumanWait {
	t.Helper()
	var hw HumanWait
	testutil.Eventually(t, waitTimeout, func() error {
		ws, err := eng.HumanWaits(context.Background(), "alice", id)
		if err != nil {
			return err
		}
		if len(ws) != 1 || ws[0].ID != want {
			return fmt.Errorf("run %s never parked on %s alone; its waits %+v", id, want, ws)
		}
		hw = ws[0]
		return nil
	})
	return hw
}

// events returns the run's event types in order.
func (b *bundle) events(t *testing.T, id string) []string {
	t.Helper()
	evs, err := b.eng.Events(context.Background(), "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}

// wantFailed stops the test unless the run failed with code.
func wantFailed(t testing.TB, run *store.Run, code string) {
	t.Helper()
	if run.Phase != store.PhaseFailed || run.Error == nil || run.Error.Code != code {
		t.Fatalf("run %s %+v, want failed with %s", run.Phase, run.Error, code)
	}
}

// cancelEnded checks the answers to a cancel of alice's ended run id: it
// is already terminal and nothing changes; another owner's cancel gets the
// answer of a missing run and changes nothing either, as does a cancel of
// a run that does not exist.
func (b *bundle) cancelEnded(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	if a, err := b.eng.Cancel(ctx, "alice", id); err != nil || a != CancelAlreadyTerminal {
		t.Fatalf("cancel terminal: %v %v", a, err)
	}
	// Foreign: the same answer as a missing run, and nothing changes.
	before := b.events(t, id)
	if _, err := b.eng.Cancel(ctx, "mallory", id); ErrorCode(err) != CodeNotFound {
		t.Fatalf("foreign cancel: %v, want %s", err, CodeNotFound)
	}
	if after := b.events(t, id); len(after) != len(before) {
		t.Errorf("foreign cancel changed the timeline: %v -> %v", before, after)
	}
	if _, err := b.eng.Cancel(ctx, "alice", "run_missing"); ErrorCode(err) != CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
}

// vanish deletes the child run's record and tasks behind the engine's
// back, as an operator might, and makes its parent's wait (still indexed
// by the child's id) due as the fallback clock would, and wakes the
// scheduler to take it.
func (b *bundle) vanish(t testing.TB, child string) {
	t.Helper()
	err := b.st.Update(context.Background(), func(tx store.Tx) error {
		tasks, err := tx.TaskListByRun(child)
		if err != nil {
			return err
		}
		for _, tk := range tasks {
			if err := tx.TaskDelete(tk.ID); err != nil {
				return err
			}
		}
		if err := tx.RunDelete(child); err != nil {
			return err
		}
		w, err := tx.TaskByChild(child)
		if err != nil {
			return err
		}
		w.ReadyAt = b.eng.clock.Now()
		return tx.TaskPut(w)
	})
	if err != nil {
		t.Fatal(err)
	}
	b.eng.wake.kick()
}

// failCode is the code of alice's run id's last node_failed event, or ""
// when no node failed.
func (b *bundle) failCode(t testing.TB, id string) string {
	t.Helper()
	evs, err := b.eng.Events(context.Background(), "alice", id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var code string
	for _, e := range evs {
		if e.Type == evNodeFailed {
			code, _ = e.Detail["code"].(string)
		}
	}
	return code
}

// oneHumanWait waits until alice's run id has one human wait open (its
// own or that of a child it waits on) and cond, if not nil, holds of the
// run, and returns the run's human waits.
func (b *bundle) oneHumanWait(t testing.TB, id, what string, cond func(*store.Run) bool) []HumanWait {
	t.Helper()
	var waits []HumanWait
	b.wait(t, id, what, func(r *store.Run) bool {
		waits, _ = b.eng.HumanWaits(context.Background(), "alice", id)
		return len(waits) == 1 && (cond == nil || cond(r))
	})
	return waits
}

// outboxLines counts mail.send's witness lines: one per real send.
func (b *bundle) outboxLines(t *testing.T) int {
	t.Helper()
	f, err := os.Open(filepath.Join(b.dataDir, "plugin-state", "mail", "outbox.jsonl"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			n++
		}
	}
	return n
}
