package host

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk/wire"
)

// TestManifestEffectClasses: a revision-2 manifest's class and probe are
// read as declared, a revision-1 manifest's class from its boolean (and
// never a probe), and a revision-2 boolean that disagrees is refused.
func TestManifestEffectClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		rev        uint32
		idempotent bool
		effect     wire.Effect
		reconcile  bool
		want       flows.Effect
		probe      bool
		err        string
	}{
		{"rev 1, idempotent", 1, true, wire.Effect_EFFECT_UNSPECIFIED, false, flows.EffectIdempotent, false, ""},
		{"rev 1, not", 1, false, wire.Effect_EFFECT_UNSPECIFIED, false, flows.EffectAtMostOnce, false, ""},
		{"rev 1 ignores rev 2's fields", 1, true, wire.Effect_EFFECT_READ, true, flows.EffectIdempotent, false, ""},
		{"rev 2, unspecified", 2, true, wire.Effect_EFFECT_UNSPECIFIED, false, flows.EffectIdempotent, false, ""},
		{"rev 2, read", 2, true, wire.Effect_EFFECT_READ, false, flows.EffectRead, false, ""},
		{"rev 2, idempotent", 2, true, wire.Effect_EFFECT_IDEMPOTENT, true, flows.EffectIdempotent, true, ""},
		{"rev 2, at most once with a probe", 2, false, wire.Effect_EFFECT_AT_MOST_ONCE, true, flows.EffectAtMostOnce, true, ""},
		{"rev 2, read but not idempotent", 2, false, wire.Effect_EFFECT_READ, false, "", false, "declares the effect class read but idempotent = false"},
		{"rev 2, at most once but idempotent", 2, true, wire.Effect_EFFECT_AT_MOST_ONCE, false, "", false, "declares the effect class at_most_once but idempotent = true"},
		{"rev 2, unknown class", 2, false, wire.Effect(7), false, "", false, "unknown effect class (7)"},
		{"rev 2, read with a probe", 2, true, wire.Effect_EFFECT_READ, true, "", false, "a read has no effect to reconcile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := manifestFromWire("", "sum", &wire.ManifestResponse{ProtocolVersion: tc.rev, Tools: []*wire.ToolSpec{
				{Name: "x.y", Idempotent: tc.idempotent, Effect: tc.effect, Reconcile: tc.reconcile}}})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tm := m.Tools[0]
			info := toolInfo(tm)
			if tm.Effect != tc.want || tm.Class() != tc.want || info.Class() != tc.want || info.Reconcile != tc.probe || tm.Reconcile != tc.probe {
				t.Fatalf("manifest %+v, info %+v: want class %s, probe %v", tm, info, tc.want, tc.probe)
			}
		})
	}
}

// TestManifestCachedBeforeEffectClasses: a cached manifest without classes
// is not used (the plugin is asked again), since it cannot say whether a
// tool has a probe.
func TestManifestCachedBeforeEffectClasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := &PluginManifest{Name: "p", SHA256: "ab", ProtocolVersion: wire.ProtocolVersion, Tools: []ToolManifest{{Name: "p.x", Idempotent: true}}}
	if err := writeManifestCache(dir, m); err != nil {
		t.Fatal(err)
	}
	if got := readManifestCache(dir, "p", "ab", ""); got != nil {
		t.Fatalf("a manifest cached without classes was used: %+v", got)
	}
	m.Tools[0].Effect = flows.EffectIdempotent
	if err := writeManifestCache(dir, m); err != nil {
		t.Fatal(err)
	}
	if got := readManifestCache(dir, "p", "ab", ""); got == nil || got.Tools[0].Class() != flows.EffectIdempotent {
		t.Fatalf("a manifest cached with classes: %+v", got)
	}
}

// TestRevision1PluginHasNoProbe: a revision-1 plugin's tool has the class
// its boolean says and is never asked: its answer is unknown.
func TestRevision1PluginHasNoProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "rev1")
	info, ok := b.h.LookupTool("rev1.echo")
	if !ok || info.Class() != flows.EffectIdempotent || info.Reconcile {
		t.Fatalf("rev1.echo: %+v, %v", info, ok)
	}
	res, err := b.h.Reconcile(context.Background(), ReconcileRequest{Tool: "rev1.echo", IdempotencyKey: "k", Input: json.RawMessage(`{}`)})
	if err != nil || res.Answer != tool.Unknown {
		t.Fatalf("%+v, %v; want unknown", res, err)
	}
	if n := launches(b.h, "rev1"); n != 0 {
		t.Fatalf("a tool without a probe was asked: %d launches", n)
	}
}

func reconcile(t *testing.T, h *Host, name, input, key string, deadline time.Time) (*ReconcileResult, error) {
	t.Helper()
	return h.Reconcile(context.Background(), ReconcileRequest{Tool: name, IdempotencyKey: key, Input: json.RawMessage(input), Deadline: deadline})
}

// TestReconcileThroughAPlugin asks testkit.once's probe through a real
// plugin process: happened with the call's result, not happened, the
// answers the input steers, failures as errors, a deadline that holds
// against a probe that ignores it, and a call whose answer was lost in a
// crash found to have happened.
func TestReconcileThroughAPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	for name, want := range map[string]struct {
		class flows.Effect
		probe bool
	}{
		"testkit.once":      {flows.EffectAtMostOnce, true},
		"testkit.exclusive": {flows.EffectAtMostOnce, false},
		"testkit.echo":      {flows.EffectRead, false},
		"testkit.sleep":     {flows.EffectIdempotent, false},
	} {
		if info, _ := b.h.LookupTool(name); info.Class() != want.class || info.Reconcile != want.probe || info.Idempotent != (want.class != flows.EffectAtMostOnce) {
			t.Errorf("%s: %+v, want class %s, probe %v", name, info, want.class, want.probe)
		}
	}
	ctx := context.Background()
	sent, err := b.h.Call(ctx, CallRequest{Tool: "testkit.once", Input: json.RawMessage(`{"value":1}`), IdempotencyKey: "k1", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := reconcile(t, b.h, "testkit.once", `{"value":1}`, "k1", time.Time{}); err != nil || r.Answer != tool.Happened || string(r.Output) != string(sent.Output) {
		t.Fatalf("k1: %+v, %v; want happened with %s", r, err, sent.Output)
	}
	for input, want := range map[string]tool.Reconciled{`{}`: tool.NotHappened, `{"probe":"unknown"}`: tool.Unknown, `{"probe":"happened"}`: tool.Happened} {
		if r, err := reconcile(t, b.h, "testkit.once", input, "k2", time.Time{}); err != nil || r.Answer != want {
			t.Errorf("k2 %s: %+v, %v; want %s", input, r, err, want)
		}
	}
	if r, err := reconcile(t, b.h, "testkit.exclusive", `{}`, "k1", time.Time{}); err != nil || r.Answer != tool.Unknown {
		t.Errorf("a tool without a probe: %+v, %v; want unknown", r, err)
	}
	_, err = reconcile(t, b.h, "testkit.once", `{"probe":"fail"}`, "k1", time.Time{})
	wantKind(t, err, KindPermanent)
	_, err = reconcile(t, b.h, "testkit.once", `{"probe":"panic"}`, "k1", time.Time{})
	if te := wantKind(t, err, KindPermanent); !strings.Contains(te.Message, "panicked") {
		t.Errorf("a panicking probe: %v", te)
	}
	_, err = reconcile(t, b.h, "testkit.once", `{"probe":"hang"}`, "k1", time.Now().Add(200*time.Millisecond))
	wantKind(t, err, KindDeadline)
	_, err = reconcile(t, b.h, "testkit.nope", `{}`, "k1", time.Time{})
	wantKind(t, err, KindUnknownTool)
	_, err = reconcile(t, b.h, "testkit.once", `{}`, "", time.Time{})
	wantKind(t, err, KindSchema)

	// The effect is recorded, then the process dies before answering:
	// the call's outcome is lost, and the probe of a new process knows it.
	_, err = b.h.Call(ctx, CallRequest{Tool: "testkit.once", Input: json.RawMessage(`{"value":3,"crash":true}`), IdempotencyKey: "k3", Attempt: 1})
	wantKind(t, err, KindCrashed)
	r, err := reconcile(t, b.h, "testkit.once", `{"value":3,"crash":true}`, "k3", time.Now().Add(time.Minute))
	if err != nil || r.Answer != tool.Happened || !strings.Contains(string(r.Output), `"key":"k3"`) {
		t.Fatalf("k3 after the crash: %+v, %v; want happened with its result", r, err)
	}
}
