package sdktest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/sdktest"
)

// sendTool records each key it sends under in the state directory, and
// its probe reads them back: what a vendor's probe test looks like.
var sendTool = sdk.Tool{
	Name:   "shop.order",
	Effect: sdk.EffectAtMostOnce,
	Run: func(_ context.Context, c *sdk.Call) (any, error) {
		return map[string]string{"order": c.IdempotencyKey}, os.WriteFile(filepath.Join(c.StateDir, c.IdempotencyKey), nil, 0o600)
	},
	Reconcile: func(_ context.Context, c *sdk.Call) (sdk.ReconcileAnswer, error) {
		_, err := os.Stat(filepath.Join(c.StateDir, c.IdempotencyKey))
		switch {
		case err == nil:
			return sdk.ReconcileAnswer{Outcome: sdk.ReconcileHappened, Output: map[string]string{"order": c.IdempotencyKey}}, nil
		case errors.Is(err, os.ErrNotExist):
			return sdk.ReconcileAnswer{Outcome: sdk.ReconcileNotHappened}, nil
		}
		return sdk.ReconcileAnswer{}, err
	},
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := sdktest.Call(ctx, sendTool, sdktest.Request{IdempotencyKey: "o1", StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	got, err := sdktest.Reconcile(ctx, sendTool, sdktest.ReconcileRequest{IdempotencyKey: "o1", StateDir: dir})
	if err != nil || got.Outcome != sdk.ReconcileHappened || string(got.Output) != `{"order":"o1"}` {
		t.Fatalf("o1: %+v, %v; want happened with its result", got, err)
	}
	got, err = sdktest.Reconcile(ctx, sendTool, sdktest.ReconcileRequest{IdempotencyKey: "o2", StateDir: dir})
	if err != nil || got.Outcome != sdk.ReconcileNotHappened || got.Output != nil {
		t.Fatalf("o2: %+v, %v; want not happened", got, err)
	}

	panicky := sendTool
	panicky.Reconcile = func(context.Context, *sdk.Call) (sdk.ReconcileAnswer, error) { panic("bug") }
	var re *sdktest.ReconcileError
	if _, err := sdktest.Reconcile(ctx, panicky, sdktest.ReconcileRequest{IdempotencyKey: "o1"}); !errors.As(err, &re) || re.Code != "Internal" {
		t.Fatalf("panicking probe: %v, want an Internal ReconcileError", err)
	}
	plain := sendTool
	plain.Reconcile = nil
	if _, err := sdktest.Reconcile(ctx, plain, sdktest.ReconcileRequest{IdempotencyKey: "o1"}); !errors.As(err, &re) || re.Code != "Unimplemented" {
		t.Fatalf("no probe: %v, want an Unimplemented ReconcileError", err)
	}
	if _, err := sdktest.Reconcile(ctx, sendTool, sdktest.ReconcileRequest{}); err == nil || errors.As(err, &re) {
		t.Fatalf("no key: %v, want a plain error", err)
	}
}
