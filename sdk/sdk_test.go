package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/sdktest"
)

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(ctx context.Context, call *sdk.Call) (any, error)
		kind string
	}{
		{"plain error is permanent", func(context.Context, *sdk.Call) (any, error) { return nil, errors.New("no") }, sdktest.KindPermanent},
		{"retryable", func(context.Context, *sdk.Call) (any, error) { return nil, sdk.Retryable(errors.New("later")) }, sdktest.KindRetryable},
		{"wrapped retryable", func(context.Context, *sdk.Call) (any, error) {
			return nil, errors.Join(errors.New("ctx"), sdk.Retryable(errors.New("later")))
		}, sdktest.KindRetryable},
		{"panic is permanent", func(context.Context, *sdk.Call) (any, error) { panic("boom") }, sdktest.KindPermanent},
		{"output not JSON", func(context.Context, *sdk.Call) (any, error) { return func() {}, nil }, sdktest.KindPermanent},
		{"decode error is permanent", func(_ context.Context, c *sdk.Call) (any, error) {
			var n int
			return nil, c.Decode(&n)
		}, sdktest.KindPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := sdktest.Call(context.Background(), sdk.Tool{Name: "t.x", Run: tt.run}, sdktest.Request{})
			var e *sdktest.Error
			if !errors.As(err, &e) || e.Kind != tt.kind {
				t.Fatalf("got %v, want kind %s", err, tt.kind)
			}
		})
	}
	if sdk.Retryable(nil) != nil {
		t.Fatal("Retryable(nil) is not nil")
	}
}

func TestCancellationIsReportedAsCancelled(t *testing.T) {
	t.Parallel()
	tool := sdk.Tool{Name: "t.wait", Run: func(ctx context.Context, call *sdk.Call) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	_, err := sdktest.Call(context.Background(), tool, sdktest.Request{Deadline: time.Now().Add(20 * time.Millisecond)})
	if e, ok := err.(*sdktest.Error); !ok || e.Kind != sdktest.KindCancelled {
		t.Fatalf("got %v, want cancelled", err)
	}
}

func TestCallCarriesItsContext(t *testing.T) {
	t.Parallel()
	var got *sdk.Call
	tool := sdk.Tool{Name: "t.look", Run: func(ctx context.Context, call *sdk.Call) (any, error) {
		got = call
		var cfg struct{ Answer int }
		if err := call.DecodeConfig(&cfg); err != nil || cfg.Answer != 42 {
			t.Errorf("config %+v, %v", cfg, err)
		}
		return nil, nil
	}}
	dl := time.Now().Add(time.Hour)
	res, err := sdktest.Call(context.Background(), tool, sdktest.Request{
		RunID: "r1", Node: "n1", Attempt: 3, IdempotencyKey: "k", Deadline: dl, StateDir: "/state", Config: `{"answer":42}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Tool != "t.look" || got.RunID != "r1" || got.Node != "n1" || got.Attempt != 3 || got.IdempotencyKey != "k" ||
		!got.Deadline.Equal(dl) || got.StateDir != "/state" || string(got.Input) != "{}" {
		t.Fatalf("call %+v", got)
	}
	if string(res.Output) != "null" || res.Cost != 0 || res.CostReported {
		t.Fatalf("result %+v", res)
	}
	// Without a key, each call gets a fresh one, as a new logical call would.
	r1, _ := sdktest.Call(context.Background(), sdk.Tool{Name: "t.key", Run: func(_ context.Context, c *sdk.Call) (any, error) { return c.IdempotencyKey, nil }}, sdktest.Request{})
	r2, _ := sdktest.Call(context.Background(), sdk.Tool{Name: "t.key", Run: func(_ context.Context, c *sdk.Call) (any, error) { return c.IdempotencyKey, nil }}, sdktest.Request{})
	if string(r1.Output) == string(r2.Output) || len(r1.Output) < 5 {
		t.Fatalf("keys %s and %s", r1.Output, r2.Output)
	}
}

func TestCheckTools(t *testing.T) {
	t.Parallel()
	run := func(context.Context, *sdk.Call) (any, error) { return nil, nil }
	tests := []struct {
		tools []sdk.Tool
		want  string
	}{
		{[]sdk.Tool{{Name: "nodot", Run: run}}, "plugin.tool"},
		{[]sdk.Tool{{Name: "Memo.put", Run: run}}, "lower-case"},
		{[]sdk.Tool{{Name: "memo.", Run: run}}, "after the dot"},
		{[]sdk.Tool{{Name: "memo.put", Run: run}, {Name: "other.get", Run: run}}, "one binary serves one plugin"},
		{[]sdk.Tool{{Name: "memo.put", Run: run}, {Name: "memo.put", Run: run}}, "twice"},
		{[]sdk.Tool{{Name: "memo.put"}}, "no Run"},
		{[]sdk.Tool{{Name: "memo.put", Run: run, Cost: -1}}, "negative"},
		{[]sdk.Tool{{Name: "memo.put", Run: run, InputSchema: `{"type":`}}, "InputSchema"},
		{[]sdk.Tool{{Name: "memo.put", Run: run, InputSchema: `{"$ref":"file:///etc/passwd"}`}}, "InputSchema"},
		{[]sdk.Tool{{Name: "memo.put", Run: run, InputSchema: `{"type":"nope"}`}}, "InputSchema"},
	}
	for _, tt := range tests {
		err := sdk.CheckTools(tt.tools...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckTools(%v) = %v, want an error mentioning %q", tt.tools[0].Name, err, tt.want)
		}
	}
	if err := sdk.CheckTools(sdk.Tool{Name: "memo.put", Run: run}, sdk.Tool{Name: "memo.get_all-2", Run: run}); err != nil {
		t.Fatal(err)
	}
}
