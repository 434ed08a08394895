package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/weirhq/weir/sdk/wire"
)

// FuzzServeCall feeds a plugin's side of the protocol any call request:
// an unknown tool, input that is not what the tool expects (or not JSON),
// any deadline, call id and attempt. Whatever arrives, the plugin answers
// (it never panics or hangs) with exactly one of a JSON output or an error
// of a kind the host knows, and a tool's own panic is a permanent error.
func FuzzServeCall(f *testing.F) {
	tools := []Tool{
		{Name: "fz.decode", Idempotent: true, Run: func(ctx context.Context, c *Call) (any, error) {
			var in struct {
				N    int               `json:"n"`
				Tags map[string]string `json:"tags"`
			}
			if err := c.Decode(&in); err != nil {
				return nil, err
			}
			if in.N < 0 {
				return nil, Retryable(errors.New("negative"))
			}
			return Result{Output: map[string]any{"n": in.N, "tags": in.Tags, "key": c.IdempotencyKey}, Cost: int64(in.N)}, nil
		}},
		{Name: "fz.raw", Run: func(ctx context.Context, c *Call) (any, error) { return c.Input, nil }},
		{Name: "fz.panic", Run: func(ctx context.Context, c *Call) (any, error) {
			var in []int
			_ = c.Decode(&in)
			return in[len(in)], nil
		}},
		{Name: "fz.wait", Run: func(ctx context.Context, c *Call) (any, error) {
			if !c.Deadline.IsZero() {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return "no deadline", nil
		}},
	}
	s, err := newServer(tools)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("fz.decode", []byte(`{"n":3,"tags":{"a":"b"}}`), int64(0), uint64(1), int32(1), "k")
	f.Add("fz.decode", []byte(`{"n":-1}`), int64(0), uint64(2), int32(2), "k")
	f.Add("fz.decode", []byte(`{"n":"x"}`), int64(0), uint64(0), int32(0), "")
	f.Add("fz.raw", []byte(`not json`), int64(0), uint64(3), int32(1), "")
	f.Add("fz.panic", []byte(`[1,2]`), int64(0), uint64(4), int32(1), "")
	f.Add("fz.wait", []byte(`{}`), int64(1), uint64(5), int32(-7), "")
	f.Add("fz.nope", []byte(`{}`), int64(-1<<63), uint64(1<<63), int32(1), "k")
	f.Fuzz(func(t *testing.T, tool string, input []byte, deadline int64, callID uint64, attempt int32, key string) {
		if tool == "fz.wait" && deadline > 0 {
			deadline %= 1 << 20 // a deadline in 1970: the call ends at once
		}
		res, err := s.Call(context.Background(), &wire.CallRequest{Tool: tool, Input: input, DeadlineUnixNano: deadline,
			CallId: callID, Attempt: attempt, IdempotencyKey: key})
		if err != nil {
			t.Fatalf("the RPC failed: %v", err)
		}
		if res == nil {
			t.Fatal("no result")
		}
		if e := res.GetError(); e != nil {
			switch e.GetKind() {
			case wire.KindRetryable, wire.KindPermanent, wire.KindCancelled:
			default:
				t.Fatalf("error kind %q is not one the host knows", e.GetKind())
			}
			if len(res.GetOutput()) > 0 {
				t.Fatalf("both an output and an error: %q, %+v", res.GetOutput(), e)
			}
			if tool == "fz.panic" && e.GetKind() != wire.KindPermanent {
				t.Fatalf("a panic answered %q, want %q", e.GetKind(), wire.KindPermanent)
			}
			return
		}
		if !json.Valid(res.GetOutput()) {
			t.Fatalf("output %q is not JSON", res.GetOutput())
		}
		if _, known := s.current().tools[tool]; !known {
			t.Fatalf("unknown tool %q answered %q", tool, res.GetOutput())
		}
		if tool == "fz.panic" {
			t.Fatalf("a panicking tool answered %q", res.GetOutput())
		}
	})
}
