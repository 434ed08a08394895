package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk"
)

// TestReconcileAsksTheProbe: a tool's class and probe are declared as the
// host reads them, and Reconcile asks the probe in the plugin's state
// directory; a tool without one answers unknown unasked.
func TestReconcileAsksTheProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	probe := func(_ context.Context, c *sdk.Call) (sdk.ReconcileAnswer, error) {
		if _, err := os.Stat(filepath.Join(c.StateDir, c.IdempotencyKey)); err == nil {
			return sdk.ReconcileAnswer{Outcome: sdk.ReconcileHappened, Output: json.RawMessage(c.Input)}, nil
		}
		if string(c.Input) == `{"fail":true}` {
			return sdk.ReconcileAnswer{}, errors.New("ledger offline")
		}
		return sdk.ReconcileAnswer{Outcome: sdk.ReconcileNotHappened}, nil
	}
	run := func(context.Context, *sdk.Call) (any, error) { return nil, nil }
	tools, err := New(dir,
		sdk.Tool{Name: "pay.charge", Effect: sdk.EffectAtMostOnce, Run: run, Reconcile: probe},
		sdk.Tool{Name: "pay.quote", Effect: sdk.EffectRead, Run: run},
		sdk.Tool{Name: "pay.refund", Run: run})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]flows.ToolInfo{
		"pay.charge": {Effect: flows.EffectAtMostOnce, Reconcile: true},
		"pay.quote":  {Effect: flows.EffectRead, Idempotent: true},
		"pay.refund": {Effect: flows.EffectAtMostOnce},
	} {
		info, _ := tools.LookupTool(name)
		if info.Class() != want.Effect || info.Idempotent != want.Idempotent || info.Reconcile != want.Reconcile {
			t.Errorf("%s: %+v, want %+v", name, info, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pay", "k1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ask := func(name, key, input string) (*tool.ReconcileResult, error) {
		return tools.Reconcile(ctx, tool.ReconcileRequest{Tool: name, IdempotencyKey: key, Input: json.RawMessage(input)})
	}
	if r, err := ask("pay.charge", "k1", `{"n":1}`); err != nil || r.Answer != tool.Happened || string(r.Output) != `{"n":1}` {
		t.Fatalf("k1: %+v, %v", r, err)
	}
	if r, err := ask("pay.charge", "k2", `{}`); err != nil || r.Answer != tool.NotHappened {
		t.Fatalf("k2: %+v, %v", r, err)
	}
	if r, err := ask("pay.refund", "k1", `{}`); err != nil || r.Answer != tool.Unknown {
		t.Fatalf("no probe: %+v, %v", r, err)
	}
	if _, err := ask("pay.charge", "k3", `{"fail":true}`); err == nil {
		t.Fatal("a failed probe answered")
	}
	if _, err := ask("pay.nope", "k1", `{}`); tool.KindOf(err) != tool.KindUnknownTool {
		t.Fatalf("unknown tool: %v", err)
	}
}
