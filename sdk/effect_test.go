package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/sdk/wire"
)

func noRun(context.Context, *Call) (any, error) { return nil, nil }

// TestManifestCarriesTheEffectClass: the class, the old boolean it maps
// to, and whether the tool has a probe, as Serve declares them.
func TestManifestCarriesTheEffectClass(t *testing.T) {
	t.Parallel()
	probe := func(context.Context, *Call) (ReconcileAnswer, error) {
		return ReconcileAnswer{Outcome: ReconcileUnknown}, nil
	}
	s, err := newServer([]Tool{
		{Name: "p.old_idem", Idempotent: true, Run: noRun},
		{Name: "p.old_once", Run: noRun},
		{Name: "p.read", Effect: EffectRead, Run: noRun},
		{Name: "p.read_both", Effect: EffectRead, Idempotent: true, Run: noRun},
		{Name: "p.idem", Effect: EffectIdempotent, Run: noRun},
		{Name: "p.once", Effect: EffectAtMostOnce, Run: noRun, Reconcile: probe},
		NewTool("p.typed", func(context.Context, *Call, struct{}) (int, error) { return 1, nil }, ReadOnly()),
	})
	if err != nil {
		t.Fatal(err)
	}
	mf, err := s.Manifest(context.Background(), &wire.ManifestRequest{ProtocolVersion: wire.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		effect     wire.Effect
		idempotent bool
		reconcile  bool
	}{
		"p.old_idem":  {wire.Effect_EFFECT_IDEMPOTENT, true, false},
		"p.old_once":  {wire.Effect_EFFECT_AT_MOST_ONCE, false, false},
		"p.read":      {wire.Effect_EFFECT_READ, true, false},
		"p.read_both": {wire.Effect_EFFECT_READ, true, false},
		"p.idem":      {wire.Effect_EFFECT_IDEMPOTENT, true, false},
		"p.once":      {wire.Effect_EFFECT_AT_MOST_ONCE, false, true},
		"p.typed":     {wire.Effect_EFFECT_READ, true, false},
	}
	for _, ts := range mf.GetTools() {
		w := want[ts.GetName()]
		if ts.GetEffect() != w.effect || ts.GetIdempotent() != w.idempotent || ts.GetReconcile() != w.reconcile {
			t.Errorf("%s: effect %v idempotent %v reconcile %v; want %+v", ts.GetName(), ts.GetEffect(), ts.GetIdempotent(), ts.GetReconcile(), w)
		}
		delete(want, ts.GetName())
	}
	if len(want) != 0 {
		t.Errorf("not in the manifest: %v", want)
	}
}

func TestInconsistentEffectIsRefused(t *testing.T) {
	t.Parallel()
	probe := func(context.Context, *Call) (ReconcileAnswer, error) { return ReconcileAnswer{}, nil }
	for _, tc := range []struct {
		tool Tool
		want string
	}{
		{Tool{Name: "p.x", Effect: EffectAtMostOnce, Idempotent: true, Run: noRun}, "Idempotent is true"},
		{Tool{Name: "p.x", Effect: "exactly_once", Run: noRun}, `Effect "exactly_once" is not one of`},
		{Tool{Name: "p.x", Effect: EffectRead, Reconcile: probe, Run: noRun}, "a read has no effect to reconcile"},
	} {
		err := CheckTools(tc.tool)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.tool.Effect, err, tc.want)
		}
		if _, err := newServer([]Tool{tc.tool}); err == nil {
			t.Errorf("Serve accepted %+v", tc.tool.Effect)
		}
		if tc.tool.Reconcile == nil && tc.tool.Class() != "" {
			t.Errorf("Class of a refused declaration = %q", tc.tool.Class())
		}
	}
}

// TestReconcileServed: the probe's answers cross the wire with the call's
// key, input and result; a failed, panicking or wrong answer is an error,
// and a tool without a probe answers Unimplemented.
func TestReconcileServed(t *testing.T) {
	t.Parallel()
	probe := func(_ context.Context, c *Call) (ReconcileAnswer, error) {
		var in struct{ Say string }
		if err := c.Decode(&in); err != nil {
			return ReconcileAnswer{}, err
		}
		switch in.Say {
		case "happened":
			return ReconcileAnswer{Outcome: ReconcileHappened, Output: map[string]string{"key": c.IdempotencyKey}}, nil
		case "bare":
			return ReconcileAnswer{Outcome: ReconcileHappened}, nil
		case "not":
			return ReconcileAnswer{Outcome: ReconcileNotHappened, Output: "ignored"}, nil
		case "fail":
			return ReconcileAnswer{}, errors.New("outbox unreadable")
		case "panic":
			panic("probe bug")
		case "unjson":
			return ReconcileAnswer{Outcome: ReconcileHappened, Output: func() {}}, nil
		}
		return ReconcileAnswer{Outcome: Reconciled(in.Say)}, nil
	}
	s, err := newServer([]Tool{
		{Name: "p.send", Run: noRun, Reconcile: probe},
		{Name: "p.plain", Run: noRun},
	})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(tool, say string) (*wire.ReconcileResponse, error) {
		return s.Reconcile(context.Background(), &wire.ReconcileRequest{Tool: tool, IdempotencyKey: "k1", Input: []byte(`{"Say":"` + say + `"}`)})
	}
	res, err := ask("p.send", "happened")
	if err != nil || res.GetOutcome() != wire.ReconcileOutcome_RECONCILE_OUTCOME_HAPPENED || string(res.GetResult().GetOutput()) != `{"key":"k1"}` {
		t.Fatalf("happened: %v, %v", res, err)
	}
	if res, err := ask("p.send", "bare"); err != nil || res.GetOutcome() != wire.ReconcileOutcome_RECONCILE_OUTCOME_HAPPENED || res.GetResult() != nil {
		t.Fatalf("happened without a result: %v, %v", res, err)
	}
	if res, err := ask("p.send", "not"); err != nil || res.GetOutcome() != wire.ReconcileOutcome_RECONCILE_OUTCOME_NOT_HAPPENED || res.GetResult() != nil {
		t.Fatalf("not happened: %v, %v", res, err)
	}
	if res, err := ask("p.send", "unknown"); err != nil || res.GetOutcome() != wire.ReconcileOutcome_RECONCILE_OUTCOME_UNKNOWN {
		t.Fatalf("unknown: %v, %v", res, err)
	}
	for say, want := range map[string]string{"fail": "outbox unreadable", "panic": "panicked: probe bug", "unjson": "not JSON", "maybe": `answered "maybe"`} {
		_, err := ask("p.send", say)
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want Internal saying %q", say, err, want)
		}
	}
	if _, err := ask("p.plain", "happened"); status.Code(err) != codes.Unimplemented {
		t.Errorf("a tool without a probe: %v, want Unimplemented", err)
	}
	if _, err := ask("p.nope", "happened"); status.Code(err) != codes.NotFound {
		t.Errorf("an unknown tool: %v, want NotFound", err)
	}
}

// TestReconcileBoundedByItsDeadline: a probe that ignores its context
// does not hold the answer past the deadline.
func TestReconcileBoundedByItsDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	seen := make(chan time.Time, 1)
	tool := Tool{Name: "p.stuck", Run: noRun, Reconcile: func(_ context.Context, c *Call) (ReconcileAnswer, error) {
		seen <- c.Deadline
		<-release
		return ReconcileAnswer{Outcome: ReconcileNotHappened}, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err := InvokeReconcile(ctx, tool, &Call{Tool: tool.Name, IdempotencyKey: "k", Input: json.RawMessage(`{}`)})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("%v, want DeadlineExceeded", err)
	}
	if deadline := <-seen; !deadline.Equal(want) {
		t.Errorf("the probe saw deadline %v, want %v", deadline, want)
	}
}
