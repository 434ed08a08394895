package engine

import (
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

func TestDecideRetry(t *testing.T) {
	t.Parallel()
	base := retryInput{Idempotent: true, Retryable: true, Retries: 3, Base: 100 * time.Millisecond, Max: time.Second}
	top := func(n int64) int64 { return n - 1 } // the jitter's largest value
	tests := []struct {
		name   string
		mod    func(*retryInput)
		jitter func(int64) int64
		want   retryDecision
	}{
		{"first failure waits at most base", func(*retryInput) {}, top, retryDecision{Action: retryLater, Backoff: 100 * time.Millisecond}},
		{"full jitter can wait almost nothing", func(*retryInput) {}, func(int64) int64 { return 0 }, retryDecision{Action: retryLater, Backoff: 1}},
		{"backoff doubles per try", func(in *retryInput) { in.Tries = 2 }, top, retryDecision{Action: retryLater, Backoff: 400 * time.Millisecond}},
		{"backoff is capped at max", func(in *retryInput) { in.Tries, in.Retries = 9, 20 }, top, retryDecision{Action: retryLater, Backoff: time.Second}},
		{"a huge try count does not overflow", func(in *retryInput) { in.Tries, in.Retries = 1000, 2000 }, top, retryDecision{Action: retryLater, Backoff: time.Second}},
		{"retry_after is honoured", func(in *retryInput) { in.RetryAfter = 700 * time.Millisecond }, top, retryDecision{Action: retryLater, Backoff: 700 * time.Millisecond}},
		{"retry_after is capped at max", func(in *retryInput) { in.RetryAfter = time.Hour }, top, retryDecision{Action: retryLater, Backoff: time.Second}},
		{"retries spent dead-letters", func(in *retryInput) { in.Tries = 3 }, top, retryDecision{Action: retryExhausted}},
		{"no retries declared fails at once", func(in *retryInput) { in.Retries = 0 }, top, retryDecision{Action: retryFail}},
		{"a permanent error fails at once", func(in *retryInput) { in.Retryable = false }, top, retryDecision{Action: retryFail}},
		{"a non-idempotent tool is never retried", func(in *retryInput) { in.Idempotent = false }, top, retryDecision{Action: retryFail}},
		{"a non-idempotent call never sent is retried", func(in *retryInput) { in.Idempotent, in.NotSent = false, true }, top, retryDecision{Action: retryLater, Backoff: 100 * time.Millisecond}},
		{"a non-idempotent call never sent dead-letters once retries are spent", func(in *retryInput) { in.Idempotent, in.NotSent, in.Tries = false, true, 3 }, top, retryDecision{Action: retryExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := base
			tt.mod(&in)
			if got := decideRetry(in, tt.jitter); got != tt.want {
				t.Errorf("decideRetry(%+v) = %+v, want %+v", in, got, tt.want)
			}
		})
	}
}

func TestToolCallKey(t *testing.T) {
	t.Parallel()
	run := &runForKey
	tests := []struct {
		c    toolCall
		want string
	}{
		{toolCall{Run: run, Node: &nodeForKey, Visit: 1}, "run_1/n/1"},
		{toolCall{Run: run, Node: &nodeForKey, Visit: 2, Index: []int{7}}, "run_1/n/2/7"},
		{toolCall{Run: run, Node: &nodeForKey, Visit: 1, Index: []int{3, 0}}, "run_1/n/1/3/0"},
	}
	for _, tt := range tests {
		if got := tt.c.key(); got != tt.want {
			t.Errorf("key(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

var (
	runForKey  = store.Run{ID: "run_1"}
	nodeForKey = flows.Node{ID: "n"}
)
