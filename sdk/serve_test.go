package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/sdk/wire"
)

func TestCancelThatOvertakesItsCall(t *testing.T) {
	t.Parallel()
	var ct callTable
	if ct.cancel(7) {
		t.Fatal("cancel of a call not started reported it running")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ct.start(7, cancel)
	if ctx.Err() == nil {
		t.Fatal("a call whose cancel arrived first started uncancelled")
	}
	ct.end(7)

	ctx, cancel = context.WithCancel(context.Background())
	ct.start(8, cancel)
	if ctx.Err() != nil {
		t.Fatal("an early cancel leaked to another call")
	}
	if !ct.cancel(8) || ctx.Err() == nil {
		t.Fatal("cancel of a running call did not cancel it")
	}
	ct.end(8)
	if len(ct.running) != 0 || len(ct.early) != 0 {
		t.Fatalf("table not empty: %v %v", ct.running, ct.early)
	}
}

// TestServeWithConfig: the manifest is made from the config at launch,
// with the config schema, contract and models declared.
func TestServeWithConfig(t *testing.T) {
	t.Setenv(wire.EnvConfig, `{"models":["small","big"]}`)
	run := func(context.Context, *Call) (any, error) { return nil, nil }
	fromConfig := func(raw json.RawMessage) ([]Tool, error) {
		var c struct{ Models []string }
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		tool := Tool{Name: "m.chat", Contract: "weir.chat/v1", Run: run}
		for _, a := range c.Models {
			tool.Models = append(tool.Models, Model{Alias: a, MaxTokens: 10, InputCost: 1, OutputCost: 2})
		}
		return []Tool{tool}, nil
	}
	s, err := newServerWith(Options{Name: "m", ConfigSchema: `{"type":"object"}`, Tools: fromConfig})
	if err != nil {
		t.Fatal(err)
	}
	mf, err := s.Manifest(context.Background(), &wire.ManifestRequest{ProtocolVersion: wire.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	if mf.GetConfigSchema() != `{"type":"object"}` || mf.GetPluginName() != "m" || len(mf.GetTools()) != 1 {
		t.Fatalf("manifest %v", mf)
	}
	tool := mf.GetTools()[0]
	if tool.GetContract() != "weir.chat/v1" || len(tool.GetModels()) != 2 || tool.GetModels()[1].GetAlias() != "big" || tool.GetModels()[1].GetOutputCost() != 2 {
		t.Errorf("tool %v", tool)
	}

	none := func(json.RawMessage) ([]Tool, error) { return nil, nil }
	if _, err := newServerWith(Options{Name: "m", Tools: none}); err != nil {
		t.Errorf("zero tools with a name: %v", err)
	}
	for name, o := range map[string]Options{
		"no Tools":           {Name: "m"},
		"zero tools no name": {Tools: none},
		"bad name":           {Name: "M!", Tools: none},
		"bad schema":         {Name: "m", ConfigSchema: `{"type":5}`, Tools: none},
		"tools refuse":       {Name: "m", Tools: func(json.RawMessage) ([]Tool, error) { return nil, errors.New("no") }},
		"other plugin":       {Name: "x", Tools: fromConfig},
	} {
		if _, err := newServerWith(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestManifestRevisions: the manifest declares a tool's Timeout and its
// effect class, in the revision the host negotiated; a revision neither
// side speaks is refused.
func TestManifestRevisions(t *testing.T) {
	t.Parallel()
	run := func(context.Context, *Call) (any, error) { return nil, nil }
	s, err := newServer([]Tool{
		{Name: "p.quick", Idempotent: true, Timeout: 2 * time.Second, Run: run},
		{Name: "p.once", Run: run},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint32{wire.MinProtocolVersion, wire.ProtocolVersion} {
		mf, err := s.Manifest(context.Background(), &wire.ManifestRequest{ProtocolVersion: v})
		if err != nil {
			t.Fatalf("revision %d: %v", v, err)
		}
		if mf.GetProtocolVersion() != v {
			t.Fatalf("asked in revision %d, answered in %d", v, mf.GetProtocolVersion())
		}
		tools := map[string]*wire.ToolSpec{}
		for _, ts := range mf.GetTools() {
			tools[ts.GetName()] = ts
		}
		if q := tools["p.quick"]; q.GetDefaultTimeout().AsDuration() != 2*time.Second || q.GetEffect() != wire.Effect_EFFECT_IDEMPOTENT {
			t.Errorf("p.quick declared %v", q)
		}
		if o := tools["p.once"]; o.GetDefaultTimeout() != nil || o.GetEffect() != wire.Effect_EFFECT_AT_MOST_ONCE {
			t.Errorf("p.once declared %v", o)
		}
	}
	for _, v := range []uint32{0, wire.ProtocolVersion + 1} {
		if _, err := s.Manifest(context.Background(), &wire.ManifestRequest{ProtocolVersion: v}); err == nil {
			t.Errorf("revision %d: answered", v)
		}
	}
	for _, d := range []time.Duration{-time.Second, wire.MaxToolTimeout + time.Second} {
		if err := CheckTools(Tool{Name: "p.x", Timeout: d, Run: run}); err == nil {
			t.Errorf("Timeout %v accepted", d)
		}
	}
}

// TestRevisionTwoKindsDowngraded: a tool's unknown and not_sent reach a
// revision-2 host as they are, and a revision-1 host, which knows
// neither, as retryable.
func TestRevisionTwoKindsDowngraded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mark func(error) error
		kind string
	}{{Unknown, wire.KindUnknown}, {NotSent, wire.KindNotSent}} {
		for _, v := range []uint32{wire.MinProtocolVersion, wire.ProtocolVersion} {
			s, err := newServer([]Tool{{Name: "p.x", Run: func(context.Context, *Call) (any, error) {
				return nil, WithCode(tt.mark(errors.New("lost")), "E_LOST")
			}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Manifest(context.Background(), &wire.ManifestRequest{ProtocolVersion: v}); err != nil {
				t.Fatal(err)
			}
			res, err := s.Call(context.Background(), &wire.CallRequest{Tool: "p.x", Input: []byte(`{}`), CallId: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := tt.kind
			if v < 2 {
				want = wire.KindRetryable
			}
			if e := res.GetError(); e.GetKind() != want || e.GetCode() != "E_LOST" || e.GetMessage() != "lost" {
				t.Errorf("%s under revision %d: %v, want kind %s", tt.kind, v, e, want)
			}
		}
	}
}

// sentStream is the server side of one server-streaming RPC (WatchManifest,
// Partials), in memory: what the server sends goes to sent.
type sentStream[T any] struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan T
}

func (w *sentStream[T]) Context() context.Context { return w.ctx }
func (w *sentStream[T]) Send(m T) error {
	w.sent <- m
	return nil
}

// TestWatchManifest: a published tool list reaches the watching host as a
// whole manifest, the server's own calls follow it (a removed tool is
// refused, a new one runs), a list of another plugin's tool is refused by
// Publish, and a plugin without Changes answers Unimplemented.
func TestWatchManifest(t *testing.T) {
	t.Parallel()
	run := func(context.Context, *Call) (any, error) { return "ran", nil }
	changes := NewToolChanges()
	s, err := newServerWith(Options{Name: "w", Changes: changes, Tools: func(json.RawMessage) ([]Tool, error) {
		return []Tool{{Name: "w.old", Run: run}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Manifest(context.Background(), &wire.ManifestRequest{ProtocolVersion: wire.ProtocolVersion}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws := &sentStream[*wire.ManifestChanged]{ctx: ctx, sent: make(chan *wire.ManifestChanged, 4)}
	done := make(chan error, 1)
	go func() { done <- s.WatchManifest(&wire.WatchManifestRequest{}, ws) }()

	if err := changes.Publish(Tool{Name: "w.new", Run: run}, Tool{Name: "w.other", Run: run}); err != nil {
		t.Fatal(err)
	}
	m := <-ws.sent
	var names []string
	for _, ts := range m.GetManifest().GetTools() {
		names = append(names, ts.GetName())
	}
	if len(names) != 2 || names[0] != "w.new" || names[1] != "w.other" || m.GetManifest().GetPluginName() != "w" {
		t.Fatalf("manifest changed to %v (%v)", names, m.GetManifest())
	}
	if m.GetManifest().GetProtocolVersion() != wire.ProtocolVersion {
		t.Fatalf("sent in revision %d", m.GetManifest().GetProtocolVersion())
	}
	res, _ := s.Call(context.Background(), &wire.CallRequest{Tool: "w.new", Input: []byte(`{}`)})
	if string(res.GetOutput()) != `"ran"` {
		t.Fatalf("new tool answered %v", res)
	}
	res, _ = s.Call(context.Background(), &wire.CallRequest{Tool: "w.old", Input: []byte(`{}`)})
	if res.GetError().GetKind() != wire.KindPermanent {
		t.Fatalf("removed tool answered %v", res)
	}
	if err := changes.Publish(Tool{Name: "w.x"}); err == nil {
		t.Fatal("a tool without Run was published")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	plain, err := newServer([]Tool{{Name: "p.t", Run: run}})
	if err != nil {
		t.Fatal(err)
	}
	err = plain.WatchManifest(&wire.WatchManifestRequest{}, &sentStream[*wire.ManifestChanged]{ctx: context.Background()})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("a fixed list's watch answered %v", err)
	}
}

// TestPartials: a call made with want_partials sends its pieces on the
// Partials stream, numbered from 1 per call and before its result; a call
// without it sends none (Partial is a no-op); a piece made after the call
// returned is not sent; a full queue drops pieces instead of blocking the
// tool, and what was queued goes out in order.
func TestPartials(t *testing.T) {
	t.Parallel()
	var straggle func()
	run := func(_ context.Context, c *Call) (any, error) {
		c.Partial("Hel")
		c.Partial("")
		c.Partial("lo")
		straggle = func() { c.Partial("late") }
		return "Hello", nil
	}
	s, err := newServer([]Tool{{Name: "p.chat", Run: run}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ps := &sentStream[*wire.PartialResult]{ctx: ctx, sent: make(chan *wire.PartialResult, 8)}
	done := make(chan error, 1)
	go func() { done <- s.Partials(&wire.PartialsRequest{}, ps) }()

	res, _ := s.Call(context.Background(), &wire.CallRequest{Tool: "p.chat", Input: []byte(`{}`), CallId: 4, WantPartials: true})
	if string(res.GetOutput()) != `"Hello"` {
		t.Fatalf("result %v", res)
	}
	// The result waited for its pieces and their end: all are on the
	// stream already.
	if len(ps.sent) != 3 {
		t.Fatalf("%d pieces sent before the result, want 2 and the end", len(ps.sent))
	}
	for i, want := range []string{"Hel", "lo", ""} {
		p := <-ps.sent
		if p.GetCallId() != 4 || p.GetSeq() != uint64(min(i+1, 2)) || string(p.GetDelta()) != want {
			t.Fatalf("piece %d: %v", i+1, p)
		}
	}
	straggle()
	if _, err := s.Call(context.Background(), &wire.CallRequest{Tool: "p.chat", Input: []byte(`{}`), CallId: 5}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(ps.sent) != 0 || len(s.partials) != 0 {
		t.Fatalf("pieces after the call returned or of a call without want_partials: %d sent, %d queued", len(ps.sent), len(s.partials))
	}

	// Nobody reads the stream: the queue fills and the tool is not
	// blocked; a second call's pieces are dropped.
	flood := func(_ context.Context, c *Call) (any, error) {
		for range streamQueue + 10 {
			c.Partial("x")
		}
		return nil, nil
	}
	s, err = newServer([]Tool{{Name: "p.flood", Run: flood}})
	if err != nil {
		t.Fatal(err)
	}
	s.Call(context.Background(), &wire.CallRequest{Tool: "p.flood", Input: []byte(`{}`), CallId: 1, WantPartials: true})
	if len(s.partials) != streamQueue {
		t.Fatalf("%d queued, want the queue's %d", len(s.partials), streamQueue)
	}
	s.Call(context.Background(), &wire.CallRequest{Tool: "p.flood", Input: []byte(`{}`), CallId: 2, WantPartials: true})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	ps = &sentStream[*wire.PartialResult]{ctx: ctx, sent: make(chan *wire.PartialResult, streamQueue)}
	go func() { _ = s.Partials(&wire.PartialsRequest{}, ps) }()
	last := uint64(0)
	for range streamQueue {
		p := <-ps.sent
		if p.GetCallId() != 1 || p.GetSeq() != last+1 {
			t.Fatalf("piece %v after seq %d: want call 1's pieces in order", p, last)
		}
		last = p.GetSeq()
	}
}
