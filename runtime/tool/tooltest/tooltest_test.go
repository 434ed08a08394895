package tooltest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/tool"
	"github.com/weirhq/weir/sdk"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// fixture serves a few tools whose behaviour the tests steer.
type fixture struct {
	tools   *Tools
	dir     string
	inside  atomic.Int64 // calls of kit.once running now
	peak    atomic.Int64
	release chan struct{}
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), release: make(chan struct{})}
	var err error
	f.tools, err = New(f.dir,
		sdk.Tool{Name: "kit.echo", Idempotent: true, Cost: 2, InputSchema: `{"type":"object","required":["v"]}`,
			Run: func(_ context.Context, c *sdk.Call) (any, error) {
				if err := os.WriteFile(filepath.Join(c.StateDir, "seen"), c.Input, 0o600); err != nil {
					return nil, err
				}
				return sdk.Result{Output: c.Input, Cost: 7}, nil
			}},
		sdk.Tool{Name: "kit.rate", Idempotent: true, Run: func(context.Context, *sdk.Call) (any, error) {
			return nil, sdk.RetryAfter(sdk.WithCode(errors.New("slow down"), "E_RATE"), 3*time.Second)
		}},
		sdk.Tool{Name: "kit.wait", Idempotent: true, Run: func(ctx context.Context, c *sdk.Call) (any, error) {
			c.Progress(1, 2)
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		sdk.Tool{Name: "other.once", Run: func(ctx context.Context, c *sdk.Call) (any, error) {
			n := f.inside.Add(1)
			defer f.inside.Add(-1)
			if n > f.peak.Load() {
				f.peak.Store(n)
			}
			select {
			case <-f.release:
			case <-ctx.Done():
			}
			return "sent", nil
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func kindOf(t *testing.T, err error) *tool.Error {
	t.Helper()
	var te *tool.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T): want a *tool.Error", err, err)
	}
	return te
}

func TestLookupToolDeclares(t *testing.T) {
	t.Parallel()
	f := setup(t)
	info, ok := f.tools.LookupTool("kit.echo")
	if !ok || !info.Idempotent || info.Cost != 2 || string(info.InputSchema) == "" {
		t.Fatalf("kit.echo: %+v %v", info, ok)
	}
	if info, ok := f.tools.LookupTool("other.once"); !ok || info.Idempotent {
		t.Fatalf("other.once: %+v %v: want not idempotent", info, ok)
	}
	if _, ok := f.tools.LookupTool("kit.nope"); ok {
		t.Fatal("an undeclared tool was found")
	}
	if _, err := New("", sdk.Tool{Name: "a.b", Run: func(context.Context, *sdk.Call) (any, error) { return nil, nil }},
		sdk.Tool{Name: "a.b", Run: func(context.Context, *sdk.Call) (any, error) { return nil, nil }}); err == nil {
		t.Fatal("a name declared twice was accepted")
	}
	if _, err := New("", sdk.Tool{Name: "bad"}); err == nil {
		t.Fatal("a tool without Run and with a bad name was accepted")
	}
}

func TestCallAnswersAndRefuses(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	res, err := f.tools.Call(ctx, tool.CallRequest{Tool: "kit.echo", Input: []byte(`{"v":1}`), IdempotencyKey: "k"})
	if err != nil || string(res.Output) != `{"v":1}` || res.Cost != 7 || !res.CostReported {
		t.Fatalf("echo: %+v %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "kit", "seen")); err != nil || string(b) != `{"v":1}` {
		t.Fatalf("state directory: %q %v, want the plugin's own under the state dir", b, err)
	}
	_, err = f.tools.Call(ctx, tool.CallRequest{Tool: "kit.echo", Input: []byte(`{}`)})
	if te := kindOf(t, err); te.Kind != tool.KindSchema || te.Tool != "kit.echo" {
		t.Fatalf("bad input: %+v", te)
	}
	if n := f.tools.Calls("kit.echo"); n != 1 {
		t.Fatalf("%d calls counted, want 1: refused input never reaches the tool", n)
	}
	_, err = f.tools.Call(ctx, tool.CallRequest{Tool: "kit.rate"})
	if te := kindOf(t, err); te.Kind != tool.KindRetryable || te.Code != "E_RATE" || te.RetryAfter != 3*time.Second || !te.Retryable() {
		t.Fatalf("rate: %+v", te)
	}
	_, err = f.tools.Call(ctx, tool.CallRequest{Tool: "kit.nope"})
	if te := kindOf(t, err); te.Kind != tool.KindUnknownTool {
		t.Fatalf("unknown: %+v", te)
	}
}

// The deadline reaches the tool's context and ends as KindDeadline; the
// caller's cancel as KindCancelled; progress is seen while the call runs.
func TestDeadlineCancelAndProgress(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, err := f.tools.Call(context.Background(), tool.CallRequest{Tool: "kit.wait", Deadline: time.Now().Add(5 * time.Millisecond)})
	if te := kindOf(t, err); te.Kind != tool.KindDeadline {
		t.Fatalf("deadline: %+v", te)
	}
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan [2]int64, 4)
	go func() {
		p := <-seen // the call is running: cancel it
		if p != [2]int64{1, 2} {
			t.Errorf("progress %v, want 1 of 2", p)
		}
		cancel()
	}()
	_, err = f.tools.Call(ctx, tool.CallRequest{Tool: "kit.wait", Progress: func(d, total int64) { seen <- [2]int64{d, total} }})
	if te := kindOf(t, err); te.Kind != tool.KindCancelled {
		t.Fatalf("cancel: %+v", te)
	}
	// A deadline already passed: the tool is never called.
	before := f.tools.Calls("kit.wait")
	_, err = f.tools.Call(context.Background(), tool.CallRequest{Tool: "kit.wait", Deadline: time.Now().Add(-time.Second)})
	if te := kindOf(t, err); te.Kind != tool.KindDeadline || f.tools.Calls("kit.wait") != before {
		t.Fatalf("past deadline: %+v, calls %d -> %d", te, before, f.tools.Calls("kit.wait"))
	}
}

// A non-idempotent tool's calls never overlap, and one waiting for its
// turn gives up at its deadline.
func TestNonIdempotentCallsAreSerial(t *testing.T) {
	t.Parallel()
	f := setup(t)
	done := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := f.tools.Call(context.Background(), tool.CallRequest{Tool: "other.once"})
			done <- err
		}()
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if f.tools.Calls("other.once") != 1 {
			return errors.New("the first call has not started")
		}
		return nil
	})
	_, err := f.tools.Call(context.Background(), tool.CallRequest{Tool: "other.once", Deadline: time.Now().Add(5 * time.Millisecond)})
	if te := kindOf(t, err); te.Kind != tool.KindDeadline {
		t.Fatalf("waiting for its turn past the deadline: %+v", te)
	}
	close(f.release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if p := f.peak.Load(); p != 1 || f.tools.Calls("other.once") != 3 {
		t.Fatalf("peak %d in flight over %d calls: want 1 over 3", p, f.tools.Calls("other.once"))
	}
}

// A tool's declared output schema reaches its ToolInfo, as the host's
// does: a resolve's result is checked against it.
func TestLookupToolOutputSchema(t *testing.T) {
	t.Parallel()
	tools, err := New("", sdk.Tool{Name: "kit.out", OutputSchema: `{"type":"object"}`, Run: func(context.Context, *sdk.Call) (any, error) { return nil, nil }},
		sdk.Tool{Name: "kit.bare", Run: func(context.Context, *sdk.Call) (any, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := tools.LookupTool("kit.out"); string(info.OutputSchema) != `{"type":"object"}` {
		t.Errorf("output schema %q", info.OutputSchema)
	}
	if info, _ := tools.LookupTool("kit.bare"); info.OutputSchema != nil {
		t.Errorf("a tool without one has output schema %q", info.OutputSchema)
	}
}
