package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

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
