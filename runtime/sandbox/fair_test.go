package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/sandbox"
)

// batchLog records the owners of each batch a pool sends.
type batchLog struct {
	mu      sync.Mutex
	batches [][]string
}

func observe(p *sandbox.Pool) *batchLog {
	l := &batchLog{}
	sandbox.ObserveBatches(p, func(owners []string) {
		l.mu.Lock()
		l.batches = append(l.batches, owners)
		l.mu.Unlock()
	})
	return l
}

func (l *batchLog) get() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.batches)
}

// Calls of two owners waiting in turn go in one batch per owner: a batch
// never holds two owners, so a callable that fails a batch fails only its
// own owner's Calls.
func TestABatchHoldsOneOwner(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1, Spare: -1})
	log := observe(p)
	release := make(chan struct{})
	answers := queueBehindOwners(t, p, release, 1, func(i int) (string, flows.Context, []flows.Call) {
		if i == 9 {
			return "", flows.Context{}, nil
		}
		c, cs := argsCall(i)
		return []string{"a", "b"}[i%2], c, cs
	})
	close(release)
	for i, a := range answers {
		if err := <-a; err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	batches := log.get()
	slices.SortFunc(batches, func(x, y []string) int { return strings.Compare(x[0], y[0]) })
	want := [][]string{{"a", "a", "a", "a"}, {"b", "b", "b", "b"}}
	if fmt.Sprint(batches) != fmt.Sprint(want) {
		t.Errorf("batches by owner %v, want %v", batches, want)
	}
	// The first call alone, then one batch per owner.
	if s := p.Stats(); s.Calls != 9 || s.Requests != 3 || s.Rerun != 0 {
		t.Errorf("stats %+v, want 9 calls in 3 round trips", s)
	}
}

// An owner whose first Call arrives while another owner holds every
// worker is answered on a spare worker at once, not after the holder's
// work ends; the holder's own next Call waits (the spare is not for an
// owner that holds workers). Without spares (the tests above) it waits.
func TestAnOwnerHoldingNoWorkerTakesASpare(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 2, Spare: 1})
	release := make(chan struct{})
	answers := queueBehindOwners(t, p, release, 2, func(i int) (string, flows.Context, []flows.Call) {
		if i > 2 {
			return "", flows.Context{}, nil
		}
		c, cs := argsCall(i)
		return "hostile", c, cs // two hold the workers, the third waits
	})
	victim := make(chan error, 1)
	go func() {
		c, cs := argsCall(9)
		_, err := p.Call(owner.WithOwner(context.Background(), "victim"), flows.Sources{Hash: flows.HashSources(callFiles), Load: func(context.Context) ([]flows.File, error) { return callFiles, nil }}, c, cs)
		victim <- err
	}()
	select {
	case err := <-victim:
		if err != nil {
			t.Fatalf("the victim: %v", err)
		}
	case err := <-answers[2]:
		t.Fatalf("the hostile owner's third Call was answered (%v) while it held both workers", err)
	case <-time.After(time.Minute):
		t.Fatal("the victim waits behind the workers the hostile owner holds")
	}
	close(release)
	for i, a := range answers {
		if err := <-a; err != nil {
			t.Errorf("hostile call %d: %v", i, err)
		}
	}
	if s := p.Stats(); s.Started != 3 {
		t.Errorf("%d workers started, want 2 and the spare", s.Started)
	}
}

// Eight hostile Calls that spin until their deadline wait in line with a
// victim's trivial one: the victim is answered at the first free worker,
// before any hostile Call's deadline, not batched with them and rerun
// after them. Before, the victim rode in the hostile batch, failed with it
// at its deadline and was evaluated again behind the eight.
func TestAVictimIsNotStarvedByHostileCalls(t *testing.T) {
	const timeout = 10 * time.Second
	p := newPool(t, sandbox.Config{Workers: 2, Spare: -1, Timeout: timeout})
	log := observe(p)
	const holders, hostile, victim = 2, 8, 10
	release := make(chan struct{})
	answers := queueBehindOwners(t, p, release, holders, func(i int) (string, flows.Context, []flows.Call) {
		switch {
		case i < holders:
			c, cs := argsCall(i)
			return "hostile", c, cs
		case i < holders+hostile:
			return "hostile", flows.Context{RunID: fmt.Sprint("hostile", i)}, []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "h", Param: "args"}}}
		case i == victim:
			c, cs := argsCall(i)
			return "victim", c, cs
		}
		return "", flows.Context{}, nil
	})
	close(release)
	for i := range holders {
		if err := <-answers[i]; err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
	}
	hostileAnswered := make(chan int, hostile)
	for i := holders; i < holders+hostile; i++ {
		go func() {
			err := <-answers[i]
			answers[i] <- err
			hostileAnswered <- i
		}()
	}
	select {
	case err := <-answers[victim]:
		if err != nil {
			t.Fatalf("the victim: %v", err)
		}
	case i := <-hostileAnswered:
		t.Fatalf("hostile call %d answered (%v) before the victim", i, <-answers[i])
	}
	// The hostile batch is in flight: it holds the other worker.
	testutil.Eventually(t, time.Minute, func() error {
		if b := log.get(); len(b) != 1 {
			return fmt.Errorf("batches %v, want the hostile one", b)
		}
		return nil
	})
	select {
	case i := <-hostileAnswered:
		t.Fatalf("hostile call %d answered (%v) before its deadline", i, <-answers[i])
	default:
	}
	if b := log.get(); len(b[0]) != hostile || slices.ContainsFunc(b[0], func(o string) bool { return o != "hostile" }) {
		t.Errorf("the batch sent: %v, want the %d hostile calls", b, hostile)
	}
	p.Close() // ends the spin
	for range hostile {
		i := <-hostileAnswered
		if err := <-answers[i]; err == nil {
			t.Errorf("hostile call %d succeeded", i)
		}
	}
}

// recordingCatalog notes each tool lookup of an Analyze by its owner and
// blocks the first until release is closed.
type recordingCatalog struct {
	who     string
	mu      *sync.Mutex
	order   *[]string
	block   chan struct{}
	entered chan struct{}
}

func (c recordingCatalog) LookupTool(name string) (flows.ToolInfo, bool) {
	c.mu.Lock()
	*c.order = append(*c.order, c.who)
	c.mu.Unlock()
	if c.block != nil {
		close(c.entered)
		<-c.block
	}
	return catalog.LookupTool(name)
}

// A registration waits for a worker in its owner's line, as a Call does:
// one owner's queued registrations do not hold back another owner's,
// which goes at the next free worker.
func TestRegistrationsTakeTurnsByOwner(t *testing.T) {
	p := newPool(t, sandbox.Config{Workers: 1, Spare: -1})
	var mu sync.Mutex
	var order []string
	release, entered := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 5)
	analyze := func(who, tag string, block chan struct{}) {
		cat := recordingCatalog{who: tag, mu: &mu, order: &order, block: block, entered: entered}
		go func() {
			_, ds, err := p.Analyze(owner.WithOwner(context.Background(), who), flows.AnalyzeRequest{Files: []flows.File{file("ok.star", okFlow)}, Tools: cat, Full: true})
			if err == nil && len(ds) != 0 {
				err = fmt.Errorf("diagnostics %q", ds)
			}
			errs <- err
		}()
	}
	analyze("a", "a1", release)
	<-entered
	for i, tag := range []string{"a2", "a3", "a4", "b1"} {
		analyze(tag[:1], tag, nil)
		testutil.Eventually(t, time.Minute, func() error {
			if n := sandbox.WaitingForWorker(p); n != i+1 {
				return fmt.Errorf("%d wait for a worker, want %d", n, i+1)
			}
			return nil
		})
	}
	close(release)
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a1", "b1", "a2", "a3", "a4"}; !slices.Equal(order, want) {
		t.Errorf("served in the order %v, want %v", order, want)
	}
}

// A batch whose Calls have all ended — their runs cancelled, a drain's
// grace over — stops at once, not at its deadline: before, the batch ran
// on to its deadline (then each Call again), so a cancelled run's spin
// held a worker and a drain waited for it. A Call that ends alone returns
// at once while the batch goes on for the others.
func TestABatchStopsWhenEveryCallEnded(t *testing.T) {
	// Either spin's goroutine may be the one that took the worker and
	// sends the batch: each ends first in turn.
	for _, first := range []int{0, 1} {
		t.Run(fmt.Sprint("spin ", first, " ends first"), func(t *testing.T) { batchStopsWhenEveryCallEnded(t, first) })
	}
}

func batchStopsWhenEveryCallEnded(t *testing.T, first int) {
	p := newPool(t, sandbox.Config{Workers: 1, Spare: -1, Timeout: time.Hour})
	release := make(chan struct{})
	held := flows.Sources{Hash: flows.HashSources(callFiles), Load: func(context.Context) ([]flows.File, error) {
		<-release
		return callFiles, nil
	}}
	holder := make(chan error, 1)
	go func() {
		c, cs := argsCall(0)
		_, err := p.Call(context.Background(), held, c, cs)
		holder <- err
	}()
	testutil.Eventually(t, time.Minute, func() error {
		if s := p.Stats(); s.Requests != 1 {
			return fmt.Errorf("%d round trips, want the holder's", s.Requests)
		}
		return nil
	})
	hot := flows.Sources{Hash: held.Hash, Load: func(context.Context) ([]flows.File, error) { return callFiles, nil }}
	var cancels []context.CancelFunc
	var answers []chan error
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels, answers = append(cancels, cancel), append(answers, make(chan error, 1))
		go func() {
			_, err := p.Call(ctx, hot, flows.Context{RunID: fmt.Sprint("spin", i)}, []flows.Call{{Ref: flows.CallableRef{Flow: "c", Node: "h", Param: "args"}}})
			answers[i] <- err
		}()
	}
	testutil.Eventually(t, time.Minute, func() error {
		if n := sandbox.WaitingCalls(p); n != 2 {
			return fmt.Errorf("%d calls wait, want the two spins", n)
		}
		return nil
	})
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func() error {
		if s := p.Stats(); s.Requests != 2 {
			return fmt.Errorf("%d round trips, want the spins' batch too", s.Requests)
		}
		return nil
	})
	answered := func(i int) error {
		t.Helper()
		select {
		case err := <-answers[i]:
			return err
		case <-time.After(time.Minute):
			t.Fatalf("spin %d is not answered a minute after its ctx ended", i)
			return nil
		}
	}
	second := 1 - first
	cancels[first]()
	if err := answered(first); !errors.Is(err, context.Canceled) {
		t.Fatalf("spin %d: %v, want its ctx's end", first, err)
	}
	select {
	case err := <-answers[second]:
		t.Fatalf("spin %d answered (%v) when only spin %d ended: the batch should go on", second, err, first)
	default:
	}
	cancels[second]()
	if err := answered(second); !errors.Is(err, context.Canceled) {
		t.Fatalf("spin %d: %v, want its ctx's end", second, err)
	}
	if s := p.Stats(); s.Requests != 2 {
		t.Errorf("stats %+v: the spins were evaluated again after the batch stopped", s)
	}
}
