package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/owner"
)

// One owner's slow calls hold every slot of a plugin and more of them
// wait; another owner's call then gets the first slot that frees, ahead of
// the first owner's waiting calls, instead of waiting behind them all.
func TestPluginSlotsAreSharedBetweenOwners(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{PerPluginConcurrency: 2, CancelGrace: 5 * time.Second}, "testkit")
	slots := b.h.set.Load().plugins["testkit"].slots
	type slow struct {
		cancel context.CancelFunc
		done   chan error
	}
	// sleep starts one of a's calls, cancelled at the end of the test.
	sleep := func(running chan struct{}) slow {
		ctx, cancel := context.WithCancel(owner.WithOwner(context.Background(), "a"))
		s := slow{cancel: cancel, done: make(chan error, 1)}
		var once sync.Once
		go func() {
			_, err := b.h.Call(ctx, CallRequest{Tool: "testkit.sleep", Input: json.RawMessage(`{"ms":60000}`),
				Progress: func(done, total int64) { once.Do(func() { close(running) }) }})
			s.done <- err
		}()
		return s
	}
	waiting := func(n int) {
		t.Helper()
		testutil.Eventually(t, time.Minute, func() error {
			if w := slots.Waiting(); w != n {
				return fmt.Errorf("%d calls wait for a slot, want %d", w, n)
			}
			return nil
		})
	}
	var calls []slow
	for range 2 { // a holds both slots
		running := make(chan struct{})
		calls = append(calls, sleep(running))
		<-running
	}
	for i := range 2 { // and queues two more
		calls = append(calls, sleep(make(chan struct{})))
		waiting(i + 1)
	}
	t.Cleanup(func() {
		for _, c := range calls {
			c.cancel()
			<-c.done
		}
	})
	bDone := make(chan error, 1)
	go func() {
		_, err := b.h.Call(owner.WithOwner(context.Background(), "b"), CallRequest{Tool: "testkit.echo", Input: json.RawMessage(`{"x":1}`)})
		bDone <- err
	}()
	waiting(3)

	calls[0].cancel() // a slot frees: it is b's, a holding one more than b
	err := <-calls[0].done
	calls[0].done <- err // for the clean-up
	if err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("b's call: %v", err)
		}
	case err := <-calls[1].done:
		calls[1].done <- err
		t.Fatalf("a's call ended (%v) while b's waited behind a's", err)
	}
	// b's slot then went to a's oldest waiting call, a's newest waits.
	waiting(1)
}
