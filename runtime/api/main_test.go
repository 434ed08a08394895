package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Plugins("testkit"),
		// A refusal sent before the body was read closes the connection;
		// net/http then lingers half a second in closeWriteAndWait so the
		// client reads the answer. That goroutine ends by itself.
		testutil.IgnoreLeaks(goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait")))
}

// testFlows are registered in every bundle.
const testFlows = `
flow(name = "echo", nodes = [task("e", tool = "testkit.echo", args = lambda ctx: ctx.input)])
flow(name = "sleep", nodes = [task("s", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])
flow(name = "gate", nodes = [
    wait("approve", args = lambda ctx: {"to": "ann"}, next = "e"),
    task("e", tool = "testkit.echo", args = lambda ctx: {"ok": ctx.results["approve"]}),
])
`

// Tokens of the TCP listener in every bundle.
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

// bundle is a server under test, served on a real Unix socket and a real
// loopback TCP listener, over a real engine, Badger store and plugin host.
type bundle struct {
	eng    *engine.Engine
	st     *recStore
	srv    *Server
	unix   *http.Client
	tcp    *http.Client
	sock   string // the Unix socket's path
	tcpURL string
	// me is the owner of requests on the Unix socket: this process's user.
	me string
}

// setup starts a bundle. cfg's Store and Tools are filled in.
func setup(t testing.TB, cfg engine.Config, opts ...Option) *bundle {
	t.Helper()
	dataDir := t.TempDir()
	plugins := filepath.Join(dataDir, "plugins")
	if _, err := host.Install(plugins, testutil.Plugin(t, "testkit"), nil); err != nil {
		t.Fatalf("install testkit: %v", err)
	}
	bst, err := badgerstore.Open(filepath.Join(dataDir, "store"), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{PluginsDir: plugins, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{st: &recStore{Store: bst}, me: userName(uint32(os.Getuid()))}
	cfg.Store, cfg.Tools = b.st, h
	if cfg.Tick == 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if b.eng, err = engine.Open(cfg); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.Register(context.Background(), []engine.SourceFile{{Path: "test.star", Src: testFlows}})
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("registering test flows: %v %v", err, res)
	}
	if err := b.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithTokens(NewTokens(map[string]string{aliceToken: "alice", bobToken: "bob"}))}, opts...)
	b.srv = NewServer(b.eng, nil, opts...)

	sock := filepath.Join(testutil.SocketDir(t), "s")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var servers []*http.Server
	var wg sync.WaitGroup
	for _, ln := range []net.Listener{uln, tln} {
		hs := &http.Server{Handler: b.srv, ConnContext: ConnContext, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, hs)
		wg.Add(1)
		go func() { defer wg.Done(); _ = hs.Serve(ln) }()
	}
	b.unix = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	b.tcp = &http.Client{Transport: &http.Transport{}}
	b.sock, b.tcpURL = sock, "http://"+tln.Addr().String()
	t.Cleanup(func() {
		for _, hs := range servers {
			_ = hs.Close()
		}
		wg.Wait()
		b.unix.CloseIdleConnections()
		b.tcp.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.eng.Stop(ctx)
		_ = h.Close()
		_ = bst.Close()
	})
	return b
}

// caller is who a request is sent as.
type caller struct {
	name  string
	token string // "" and local: the Unix socket
	local bool
}

var (
	local = caller{name: "local", local: true}
	alice = caller{name: "alice", token: aliceToken}
	bob   = caller{name: "bob", token: bobToken}
)

// answer is an HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// errorBody decodes the answer as an API error, strictly: every refusal is
// JSON with exactly code, message and class.
func (a answer) errorBody(t testing.TB) engine.Error {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error answer has Content-Type %q, want application/json", ct)
	}
	var e engine.Error
	if err := DecodeStrict(a.body, &e); err != nil {
		t.Fatalf("error answer %d is not an API error: %v: %s", a.status, err, a.body)
	}
	if e.Code == "" || e.Message == "" || e.Class == "" {
		t.Errorf("error answer lacks code, message or class: %s", a.body)
	}
	return e
}

// send sends a request as c. body may be nil, a []byte, a string or an
// io.Reader.
func (b *bundle) send(t testing.TB, c caller, method, path string, body any, hdr ...string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(v)
	case string:
		rd = strings.NewReader(v)
	case io.Reader:
		rd = v
	default:
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	client, base := b.tcp, b.tcpURL
	if c.local {
		client, base = b.unix, "http://weir"
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// start starts a run as c and returns its id.
func (b *bundle) start(t testing.TB, c caller, flow, input, requestID string) string {
	t.Helper()
	a := b.send(t, c, "POST", "/v1/runs", apitypes.StartRequest{Flow: flow, Input: json.RawMessage(input), RequestID: requestID})
	if a.status != http.StatusCreated {
		t.Fatalf("start %s as %s: %d %s", flow, c.name, a.status, a.body)
	}
	var res engine.StartResult
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatal(err)
	}
	return res.RunID
}

// waitPhase polls the run (as owner) until cond holds.
func (b *bundle) waitPhase(t testing.TB, owner, id string, cond func(store.Phase) bool) *store.Run {
	t.Helper()
	var run *store.Run
	testutil.Eventually(t, 30*time.Second, func() error {
		err := b.st.View(context.Background(), func(tx store.Tx) error {
			var err error
			run, err = tx.RunGet(id)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if run.Owner != owner {
			t.Fatalf("run %s has owner %q, want %q", id, run.Owner, owner)
		}
		if cond(run.Phase) {
			return nil
		}
		return fmt.Errorf("run %s stayed %s", id, run.Phase)
	})
	return run
}

// recStore is the real store with its writes recorded, so a test can say
// exactly what a request wrote, and with a switch that makes every Update
// fail as a broken disk would.
type recStore struct {
	store.Store
	mu     sync.Mutex
	writes []string
	broken error
}

func (s *recStore) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	s.mu.Lock()
	broken := s.broken
	s.mu.Unlock()
	if broken != nil {
		return broken
	}
	// The writes are noted when fn succeeds, inside the transaction: noted
	// after Update returned, a run's finish could be seen by a test (the
	// commit is visible) before its writes were noted, and be taken for
	// the writes of a later request.
	return s.Store.Update(ctx, func(tx store.Tx) error {
		var mine []string
		if err := fn(&recTx{Tx: tx, rec: &mine}); err != nil {
			return err
		}
		s.mu.Lock()
		s.writes = append(s.writes, mine...)
		s.mu.Unlock()
		return nil
	})
}

// breakWith makes every later Update fail with err (nil repairs it).
func (s *recStore) breakWith(err error) {
	s.mu.Lock()
	s.broken = err
	s.mu.Unlock()
}

// takeWrites returns the writes of successful transactions since the last
// call (a commit that failed after its function succeeded would be listed:
// the tests here do not break the disk mid-commit).
func (s *recStore) takeWrites() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes
	s.writes = nil
	return w
}

// recTx records each write as "Method key".
type recTx struct {
	store.Tx
	rec *[]string
}

func (t *recTx) note(method, key string) { *t.rec = append(*t.rec, method+" "+key) }

func (t *recTx) FlowVersionPut(v *store.FlowVersion) error {
	t.note("FlowVersionPut", v.Name)
	return t.Tx.FlowVersionPut(v)
}
func (t *recTx) SourcePut(s *store.Source) error {
	t.note("SourcePut", s.Hash)
	return t.Tx.SourcePut(s)
}
func (t *recTx) RunInsert(r *store.Run) error { t.note("RunInsert", r.ID); return t.Tx.RunInsert(r) }
func (t *recTx) RunUpdate(r *store.Run) error { t.note("RunUpdate", r.ID); return t.Tx.RunUpdate(r) }
func (t *recTx) RunDelete(id string) error    { t.note("RunDelete", id); return t.Tx.RunDelete(id) }
func (t *recTx) ContinuationPut(id string, d []byte) error {
	t.note("ContinuationPut", id)
	return t.Tx.ContinuationPut(id, d)
}
func (t *recTx) ContinuationDelete(id string) error {
	t.note("ContinuationDelete", id)
	return t.Tx.ContinuationDelete(id)
}
func (t *recTx) DedupPut(d *store.Dedup) error { t.note("DedupPut", d.RunID); return t.Tx.DedupPut(d) }
func (t *recTx) DedupDelete(owner, rid string) error {
	t.note("DedupDelete", owner+"/"+rid)
	return t.Tx.DedupDelete(owner, rid)
}
func (t *recTx) TaskPut(k *store.Task) error   { t.note("TaskPut", k.RunID); return t.Tx.TaskPut(k) }
func (t *recTx) TaskDelete(id string) error    { t.note("TaskDelete", id); return t.Tx.TaskDelete(id) }
func (t *recTx) LeasePut(l *store.Lease) error { t.note("LeasePut", l.RunID); return t.Tx.LeasePut(l) }
func (t *recTx) LeaseDelete(id string) error   { t.note("LeaseDelete", id); return t.Tx.LeaseDelete(id) }
func (t *recTx) IdemPut(r *store.Idem) error   { t.note("IdemPut", r.RunID); return t.Tx.IdemPut(r) }
func (t *recTx) DeadLetterPut(d *store.DeadLetter) error {
	t.note("DeadLetterPut", d.RunID)
	return t.Tx.DeadLetterPut(d)
}
func (t *recTx) EventAppend(e *store.Event) error {
	t.note("EventAppend", e.RunID)
	return t.Tx.EventAppend(e)
}
func (t *recTx) MetaPut(k string, v []byte) error { t.note("MetaPut", k); return t.Tx.MetaPut(k, v) }
