package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// binDir holds the real plugin binaries, built once by TestMain.
var binDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "weir-engine-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "../../plugins/testkit", "../../plugins/mail")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building plugins:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			return 1
		}
	}
	return code
}

// bundle is an engine under test with its collaborators.
type bundle struct {
	eng     *Engine
	st      *badgerstore.Store
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
		if _, err := host.Install(plugins, filepath.Join(binDir, name), nil); err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
	}
	var err error
	if b.st, err = badgerstore.Open(filepath.Join(b.dataDir, "store"), badgerstore.Options{}); err != nil {
		t.Fatal(err)
	}
	if b.host, err = host.New(host.Config{PluginsDir: plugins, DataDir: b.dataDir}); err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Tools = b.st, b.host
	if cfg.Tick == 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Millisecond
	}
	if b.eng, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	if src != "" {
		res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "test.star", Src: src}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diagnostics) > 0 {
			t.Fatalf("registering test flow:\n%s", res.Diagnostics)
		}
	}
	if err := b.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.eng.Stop(ctx)
		b.host.Close()
		b.st.Close()
	})
	return b
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

// wait polls the store until the run satisfies cond or the test's
// deadline passes. Polling a condition, not sleeping for a guess.
func (b *bundle) wait(t testing.TB, id string, what string, cond func(*store.Run) bool) *store.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run, err := b.eng.Get(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(run) {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never became %s; last phase %s error %+v", id, what, run.Phase, run.Error)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (b *bundle) waitTerminal(t testing.TB, id string) *store.Run {
	return b.wait(t, id, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
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
