package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/sdktest"
	"github.com/weirhq/weir/sdk/wire"
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

func TestErrorCodeAndRetryAfter(t *testing.T) {
	t.Parallel()
	cause := errors.New("rate limited")
	tests := []struct {
		name       string
		err        error
		kind, code string
		retryAfter time.Duration
		message    string // substring
	}{
		{"code on a plain error", sdk.WithCode(cause, "E_MODEL_AUTH"), sdktest.KindPermanent, "E_MODEL_AUTH", 0, "rate limited"},
		{"retry-after then code", sdk.WithCode(sdk.RetryAfter(cause, 2*time.Second), "E_MODEL_RATE"), sdktest.KindRetryable, "E_MODEL_RATE", 2 * time.Second, "rate limited"},
		{"code then retry-after", sdk.RetryAfter(sdk.WithCode(cause, "E_MODEL_RATE"), 20*time.Second), sdktest.KindRetryable, "E_MODEL_RATE", 20 * time.Second, "rate limited"},
		{"wrapped with %w", fmt.Errorf("calling the model: %w", sdk.RetryAfter(cause, time.Second)), sdktest.KindRetryable, "", time.Second, "calling the model: rate limited"},
		{"an Error value", &sdk.Error{Kind: sdk.KindRetryable, Code: "E_X", Message: "busy", RetryAfter: 5 * time.Second}, sdktest.KindRetryable, "E_X", 5 * time.Second, "busy"},
		{"retry-after capped", &sdk.Error{Kind: sdk.KindRetryable, Message: "busy", RetryAfter: 3 * time.Hour}, sdktest.KindRetryable, "", wire.MaxRetryAfter, "busy"},
		{"negative retry-after ignored", sdk.RetryAfter(cause, -time.Second), sdktest.KindRetryable, "", 0, "rate limited"},
		{"retry-after on a permanent error ignored", &sdk.Error{Kind: sdk.KindPermanent, Err: cause, RetryAfter: time.Second}, sdktest.KindPermanent, "", 0, "rate limited"},
		{"unknown kind is permanent", &sdk.Error{Kind: "later", Err: cause}, sdktest.KindPermanent, "", 0, "rate limited"},
		{"unknown outcome keeps its code", sdk.WithCode(sdk.Unknown(cause), "E_GONE"), sdktest.KindUnknown, "E_GONE", 0, "rate limited"},
		{"unknown outcome drops a retry-after", sdk.Unknown(sdk.RetryAfter(cause, time.Second)), sdktest.KindUnknown, "", 0, "rate limited"},
		{"not sent", sdk.NotSent(sdk.WithCode(cause, "E_DOWN")), sdktest.KindNotSent, "E_DOWN", 0, "rate limited"},
		{"not sent as an Error value", &sdk.Error{Kind: sdk.KindNotSent, Err: cause, RetryAfter: time.Second}, sdktest.KindNotSent, "", 0, "rate limited"},
		{"malformed code", sdk.WithCode(cause, "rate limited"), sdktest.KindPermanent, "", 0, "malformed error code"},
		{"code too long", sdk.WithCode(cause, "E_"+strings.Repeat("X", wire.MaxErrorCodeBytes-1)), sdktest.KindPermanent, "", 0, "longer than 64 bytes"},
		{"longest code", sdk.WithCode(cause, "E_"+strings.Repeat("X", wire.MaxErrorCodeBytes-2)), sdktest.KindPermanent, "E_" + strings.Repeat("X", wire.MaxErrorCodeBytes-2), 0, "rate limited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := sdk.Tool{Name: "t.x", Run: func(context.Context, *sdk.Call) (any, error) { return nil, tt.err }}
			_, err := sdktest.Call(context.Background(), tool, sdktest.Request{})
			var e *sdktest.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *sdktest.Error", err)
			}
			if e.Kind != tt.kind || e.Code != tt.code || e.RetryAfter != tt.retryAfter || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("got kind %s code %q retry-after %v message %q; want %s %q %v containing %q",
					e.Kind, e.Code, e.RetryAfter, e.Message, tt.kind, tt.code, tt.retryAfter, tt.message)
			}
		})
	}
	if !errors.Is(sdk.RetryAfter(sdk.WithCode(cause, "E_A"), time.Second), cause) {
		t.Fatal("the helpers lose the cause for errors.Is")
	}
	if sdk.WithCode(nil, "E_A") != nil || sdk.RetryAfter(nil, time.Second) != nil || sdk.Unknown(nil) != nil || sdk.NotSent(nil) != nil {
		t.Fatal("WithCode(nil) or RetryAfter(nil) is not nil")
	}
}

// TestCancelledKeepsCodeDropsRetryAfter: a call weir cancelled is reported
// as cancelled whatever the tool marked it, keeping its code.
func TestCancelledKeepsCodeDropsRetryAfter(t *testing.T) {
	t.Parallel()
	tool := sdk.Tool{Name: "t.wait", Run: func(ctx context.Context, call *sdk.Call) (any, error) {
		<-ctx.Done()
		return nil, sdk.RetryAfter(sdk.WithCode(ctx.Err(), "E_SLOW"), time.Second)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := sdktest.Call(ctx, tool, sdktest.Request{})
	if e, ok := err.(*sdktest.Error); !ok || e.Kind != sdktest.KindCancelled || e.Code != "E_SLOW" || e.RetryAfter != 0 {
		t.Fatalf("got %#v, want cancelled with code E_SLOW and no retry-after", err)
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

// Under sdktest a call's partial results are watched: OnPartial sees each
// non-empty one while the call runs, in order, Result.Partials holds them,
// and one a goroutine of the tool makes after the call returned is not
// seen.
func TestPartialsAreSeenWhileTheCallRuns(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 10)
	release := make(chan struct{})
	returned, straggler := make(chan struct{}), make(chan struct{})
	tool := sdk.Tool{Name: "t.chat", Run: func(_ context.Context, c *sdk.Call) (any, error) {
		c.Partial("Hel")
		<-release // held until the test has seen the first piece
		c.Partial("")
		c.Partial("lo")
		go func() { defer close(straggler); <-returned; c.Partial("late") }()
		return "Hello", nil
	}}
	done := make(chan *sdktest.Result)
	go func() {
		res, err := sdktest.Call(context.Background(), tool, sdktest.Request{OnPartial: func(d string) { seen <- d }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if p := <-seen; p != "Hel" {
		t.Fatalf("first piece %q", p)
	}
	close(release)
	res := <-done
	close(returned)
	<-straggler
	if len(seen) != 1 || strings.Join(res.Partials, "|") != "Hel|lo" {
		t.Fatalf("%d more live pieces, %q recorded: want lo live, and nothing empty or after the call returned", len(seen), res.Partials)
	}
}

// OnProgress sees each report while the call runs, in order, and none
// that a goroutine of the tool makes after the call returned.
func TestProgressIsSeenWhileTheCallRuns(t *testing.T) {
	t.Parallel()
	seen := make(chan sdktest.Progress, 10)
	release := make(chan struct{})
	returned, straggler := make(chan struct{}), make(chan struct{})
	tool := sdk.Tool{Name: "t.prog", Run: func(_ context.Context, c *sdk.Call) (any, error) {
		c.Progress(1, 3)
		<-release // held until the test has seen the first report
		c.Progress(3, 3)
		go func() { defer close(straggler); <-returned; c.Progress(4, 3) }()
		return nil, nil
	}}
	done := make(chan *sdktest.Result)
	go func() {
		res, err := sdktest.Call(context.Background(), tool, sdktest.Request{OnProgress: func(d, total int64) { seen <- sdktest.Progress{Done: d, Total: total} }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if p := <-seen; p != (sdktest.Progress{Done: 1, Total: 3}) {
		t.Fatalf("first report %+v", p)
	}
	close(release)
	res := <-done
	close(returned)
	<-straggler
	if len(seen) != 1 || len(res.Progress) != 2 {
		t.Fatalf("%d more live reports, %d recorded (%+v): want the final one only, and none after the call returned", len(seen), len(res.Progress), res.Progress)
	}
}
