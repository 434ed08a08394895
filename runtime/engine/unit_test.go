package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/tool/tooltest"
	"github.com/weirhq/weir/sdk"
)

// The unit layer: an engine on the in-memory store, a fake clock and
// in-process tools. Nothing waits for wall time to pass: time moves when
// a test advances the clock, and a tool that must take long blocks on a
// gate the test opens. Tests here assert what the engine decides; the
// integration layer (setup) keeps what only real processes and a real
// Badger can show.

// unitEpoch is where the unit layer's fake clock starts.
var unitEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testBundle is an engine of the unit layer and its collaborators.
type testBundle struct {
	*bundle
	mem   *memstore.Store
	clock *clock.Fake
	tools *tooltest.Tools
	kit   *kit
	// tick is the scheduler's period: a parked task comes due on the
	// first tick after its time, so a test advances past a time by a tick.
	tick time.Duration
}

// setupUnit starts an engine over memstore, a fake clock and the kit's
// in-process tools, registers src and stops everything at the end.
func setupUnit(t testing.TB, cfg Config, src string) *testBundle {
	t.Helper()
	return setupUnitOn(t, cfg, src, nil)
}

// setupUnitOn is setupUnit with the engine's store wrapped by wrap (nil:
// memstore itself).
func setupUnitOn(t testing.TB, cfg Config, src string, wrap func(store.Store) store.Store) *testBundle {
	t.Helper()
	b := &testBundle{bundle: &bundle{}, mem: memstore.New(), clock: clock.NewFake(unitEpoch), kit: newKit()}
	b.st = b.mem
	if wrap != nil {
		b.st = wrap(b.mem)
	}
	t.Cleanup(func() { b.mem.Close() })
	var err error
	if b.tools, err = tooltest.New(t.TempDir(), b.kit.tools()...); err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Clock = b.st, b.clock
	if w, ok := cfg.Tools.(toolsWrapper); ok {
		w.wrap(b.tools) // the test stands between the engine and the kit
	} else {
		cfg.Tools = b.tools
	}
	if cfg.Tick == 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	b.tick = cfg.Tick
	b.eng = openEngine(t, cfg, src)
	return b
}

// kit is the unit layer's plugin: tools whose timing the test controls.
type kit struct {
	mu         sync.Mutex
	fails      map[string]int // kit.fail's tries, by idempotency key
	sends      map[string]int // kit.send's effects, by idempotency key
	cancelled  int            // kit.block calls that saw their cancel
	blocked    int            // kit.block and kit.send calls waiting at a gate now
	peak       int            // the most ever waiting at once
	spentTotal int64          // what kit.spend calls reported
	gates      map[string]chan struct{}
	atGate     map[string]int // calls waiting now, by gate
}

func newKit() *kit {
	return &kit{fails: map[string]int{}, sends: map[string]int{}, gates: map[string]chan struct{}{}, atGate: map[string]int{}}
}

// gate returns the named gate, made on first use.
func (k *kit) gate(name string) chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	g, ok := k.gates[name]
	if !ok {
		g = make(chan struct{})
		k.gates[name] = g
	}
	return g
}

// open lets every kit.block call waiting on the gate (and every later one)
// answer.
func (k *kit) open(name string) { close(k.gate(name)) }

func (k *kit) read(f func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f()
}

// pass blocks until gate opens ("" passes at once) or ctx ends, which it
// counts as a cancel seen.
func (k *kit) pass(ctx context.Context, gate string) error {
	if gate == "" {
		return nil
	}
	k.read(func() { k.blocked++; k.peak = max(k.peak, k.blocked); k.atGate[gate]++ })
	defer k.read(func() { k.blocked--; k.atGate[gate]-- })
	select {
	case <-k.gate(gate):
		return nil
	case <-ctx.Done():
		k.read(func() { k.cancelled++ })
		return ctx.Err()
	}
}

func (k *kit) tools() []sdk.Tool {
	type gated struct {
		Gate string `json:"gate,omitempty"`
	}
	return []sdk.Tool{
		{Name: "kit.echo", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) { return c.Input, nil }},
		sdk.NewTool("kit.block", func(ctx context.Context, c *sdk.Call, in gated) (any, error) {
			c.Progress(0, 1)
			if err := k.pass(ctx, in.Gate); err != nil {
				return nil, err
			}
			c.Progress(1, 1)
			return map[string]any{"gate": in.Gate}, nil
		}, sdk.Idempotent()),
		sdk.NewTool("kit.fail", func(_ context.Context, c *sdk.Call, in struct {
			Times        int    `json:"times"`
			Code         string `json:"code,omitempty"`
			RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
		}) (any, error) {
			var n int
			k.read(func() { k.fails[c.IdempotencyKey]++; n = k.fails[c.IdempotencyKey] })
			if n <= in.Times {
				err := sdk.Retryable(fmt.Errorf("try %d of %d planned failures", n, in.Times))
				if in.Code != "" {
					err = sdk.WithCode(err, in.Code)
				}
				if in.RetryAfterMS > 0 {
					err = sdk.RetryAfter(err, time.Duration(in.RetryAfterMS)*time.Millisecond)
				}
				return nil, err
			}
			return map[string]any{"tries": n}, nil
		}, sdk.Idempotent()),
		// kit.lose and kit.lose_idem (at most once, idempotent) fail
		// their first Times tries as a tool that lost the call's answer
		// (unknown) or never got the call through (not_sent) would.
		sdk.NewTool("kit.lose", k.lose, sdk.Description("at most once")),
		sdk.NewTool("kit.lose_idem", k.lose, sdk.Idempotent()),
		// kit.spend declares a cost of 10 a call and reports in.Cost (at
		// most that) once its gate opens.
		sdk.NewTool("kit.spend", func(ctx context.Context, c *sdk.Call, in struct {
			Cost int64  `json:"cost"`
			Gate string `json:"gate,omitempty"`
		}) (sdk.Result, error) {
			if err := k.pass(ctx, in.Gate); err != nil {
				return sdk.Result{}, err
			}
			k.read(func() { k.spentTotal += in.Cost })
			return sdk.Result{Output: map[string]any{"cost": in.Cost}, Cost: in.Cost}, nil
		}, sdk.Idempotent(), sdk.Cost(kitSpendCost)),
		// kit.send is not idempotent: its effect happens when the call
		// begins, before it waits on its gate, as a mail leaves before
		// the server's answer does.
		sdk.NewTool("kit.send", func(ctx context.Context, c *sdk.Call, in struct {
			To   string `json:"to"`
			Gate string `json:"gate,omitempty"`
			Pad  int    `json:"pad,omitempty"` // bytes of padding in the answer
		}) (any, error) {
			k.read(func() { k.sends[c.IdempotencyKey]++ })
			if err := k.pass(ctx, in.Gate); err != nil {
				return nil, err
			}
			if in.Pad > 0 {
				return map[string]any{"sent_to": in.To, "pad": strings.Repeat("x", in.Pad)}, nil
			}
			return map[string]any{"sent_to": in.To}, nil
		}),
	}
}

// loseInput is kit.lose's input.
type loseInput struct {
	Times int    `json:"times"`
	Kind  string `json:"kind"` // unknown or not_sent
}

func (k *kit) lose(_ context.Context, c *sdk.Call, in loseInput) (any, error) {
	var n int
	k.read(func() { k.fails[c.IdempotencyKey]++; n = k.fails[c.IdempotencyKey] })
	if n > in.Times {
		return map[string]any{"tries": n}, nil
	}
	err := sdk.WithCode(fmt.Errorf("try %d of %d planned losses", n, in.Times), "E_KIT_LOST")
	if in.Kind == sdk.KindNotSent {
		return nil, sdk.NotSent(err)
	}
	return nil, sdk.Unknown(err)
}

// kitSpendCost is kit.spend's declared cost per call.
const kitSpendCost = 10

// kitIs waits until the kit's counters satisfy cond.
func (b *testBundle) kitIs(t testing.TB, what string, cond func(k *kit) bool) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, func() error {
		ok := false
		b.kit.read(func() { ok = cond(b.kit) })
		if !ok {
			return errors.New("the kit never saw " + what)
		}
		return nil
	})
}

// sends is the number of kit.send effects.
func (b *testBundle) sends() int {
	n := 0
	b.kit.read(func() {
		for _, c := range b.kit.sends {
			n += c
		}
	})
	return n
}

// parkedUntil returns the ready time of the run's one queued task.
func (b *testBundle) parkedUntil(t testing.TB, id string) time.Time {
	t.Helper()
	var at time.Time
	err := b.mem.View(context.Background(), func(tx store.Tx) error {
		tasks, err := tx.TaskListByRun(id)
		if err != nil {
			return err
		}
		if len(tasks) != 1 {
			return fmt.Errorf("run %s has %d tasks, want 1", id, len(tasks))
		}
		at = tasks[0].ReadyAt
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}
