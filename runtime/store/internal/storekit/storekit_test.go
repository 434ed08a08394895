package storekit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

func TestMain(m *testing.M) {
	testutil.Main(m)
}

// TestGateCloseWaitsAndRefuses: Close waits for a call in progress, later
// calls get store.ErrClosed, and only the first Close returns nil.
func TestGateCloseWaitsAndRefuses(t *testing.T) {
	t.Parallel()
	var g Gate
	if err := g.Enter(context.Background()); err != nil {
		t.Fatalf("Enter: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	testutil.Eventually(t, 30*time.Second, func() error {
		if !g.Closed() {
			return errors.New("Close has not begun")
		}
		return nil
	})
	if err := g.Enter(context.Background()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Enter while closing: %v, want ErrClosed", err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a call in progress", err)
	default:
	}
	g.Leave()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := g.Close(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
}

// TestGateRefusals: after the closed check come Refused's error, then the
// context's; a refused call holds nothing Close would wait for.
func TestGateRefusals(t *testing.T) {
	t.Parallel()
	errLost := errors.New("lost")
	var refuse error
	g := Gate{Refused: func() error { return refuse }}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Enter(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with a cancelled context: %v", err)
	}
	refuse = errLost
	if err := g.Enter(cctx); !errors.Is(err, errLost) {
		t.Fatalf("Enter once refused: %v, want Refused's error before the context's", err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close after refused calls: %v", err)
	}
	if err := g.Enter(context.Background()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Enter after Close: %v, want ErrClosed before Refused's error", err)
	}
}

func TestTxGuard(t *testing.T) {
	t.Parallel()
	rw, ro := TxGuard{}, TxGuard{ReadOnly: true}
	if err := errors.Join(rw.Open(), rw.Writable(), ro.Open()); err != nil {
		t.Fatalf("open transactions: %v", err)
	}
	if err := ro.Writable(); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("write in a View: %v, want ErrReadOnly", err)
	}
	rw.End()
	ro.End()
	for _, err := range []error{rw.Open(), rw.Writable(), ro.Open(), ro.Writable()} {
		if !errors.Is(err, ErrTxDone) {
			t.Fatalf("ended transaction: %v, want ErrTxDone", err)
		}
	}
}

// TestRequestPanic: a panic in Fn is returned by Call as a *PanicError and
// raised again by Wait in the caller's goroutine.
func TestRequestPanic(t *testing.T) {
	t.Parallel()
	r := NewRequest(context.Background(), func(store.Tx) error { panic("kaboom") })
	err := r.Call(nil)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Fatalf("Call: %v, want a *PanicError with the value and a stack", err)
	}
	r.Res <- err
	defer func() {
		if p := recover(); p != pe {
			t.Fatalf("Wait raised %v, want the *PanicError", p)
		}
	}()
	_ = r.Wait()
	t.Fatal("Wait returned after a panic")
}

// TestRequestSubmit: a request whose context ends while the committer's
// queue is full is not queued.
func TestRequestSubmit(t *testing.T) {
	t.Parallel()
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := NewRequest(cctx, func(store.Tx) error { return nil })
	if err := r.Submit(make(chan *Request)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a cancelled context and no committer: %v", err)
	}
	q := make(chan *Request, 1)
	if err := NewRequest(context.Background(), r.Fn).Submit(q); err != nil || len(q) != 1 {
		t.Fatalf("Submit: %v, %d queued", err, len(q))
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	zero, neg, set := 0, int64(-1), time.Second
	Default(&zero, 7)
	Default(&neg, 8)
	Default(&set, time.Minute)
	if zero != 7 || neg != 8 || set != time.Second {
		t.Fatalf("Default: %d %d %v, want 7 8 1s", zero, neg, set)
	}
}
