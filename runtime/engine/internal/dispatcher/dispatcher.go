// Package dispatcher is the scheduler's dispatch service: on every wake-up
// (a new run, a freed slot, a child finishing) and on its tick (the
// fallback clock, for parked tasks coming due and a lost wake-up) it
// matches ready tasks to free worker slots and budget slices. It shares
// the slots between owners by weighted fair queuing (fair.go: Next and
// Served, pure functions), each owner's tasks oldest first, reading the
// head of every owner's queue (store.Tx.TaskListReadyByOwner) so that one
// owner's backlog hides nobody else's. Whether one task may start is the
// engine's to say (Engine.Offer); how far a pass reads the queue is
// Again, a pure function.
package dispatcher

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// Outcome is what became of one task offered to the engine.
type Outcome int

const (
	// Waits: the task stays queued (its cost does not fit the budget in
	// flight now, or its run could not be read); the tasks behind it may
	// still start.
	Waits Outcome = iota
	// Started: a worker holds the task.
	Started
	// Skipped: a worker of this engine holds the task already.
	Skipped
	// Dropped: the task waited past its queue deadline and was dropped.
	Dropped
	// Withheld: the task is left to a daemon of the fleet that serves
	// every tool its flow calls.
	Withheld
	// NoSlot: no worker slot is free: nothing else can start this pass.
	NoSlot
)

// Engine is what the dispatcher needs from the engine.
type Engine interface {
	// FreeSlots is how many worker slots are free now.
	FreeSlots() int
	// InHand is how many ready tasks a worker of this engine holds
	// already (listed again, they are skipped).
	InHand() int
	// ListReady lists the heads of the owners' queues ready now: up to
	// perOwner tasks of each owner, each owner's oldest first, owners by
	// their oldest task, up to limit in all, each with its Owner set
	// (store.Tx.TaskListReadyByOwner).
	ListReady(ctx context.Context, perOwner, limit int) ([]*store.Task, error)
	// Weight is owner's share of the slots while owners contend (>= 1).
	Weight(owner string) int
	// Offer tries to start t.
	Offer(ctx context.Context, t *store.Task) Outcome
	// Tick is the fallback clock's interval.
	Tick() time.Duration
	// Error logs a failure.
	Error(msg string, args ...any)
}

// MaxWithheldScan bounds how many tasks withheld from this engine a pass
// looks past to find work it can take.
const MaxWithheldScan = 4096

// MaxOwnersPerPage bounds how many owners' heads a page lists in full:
// a page lists PerOwner tasks of each owner, up to PerOwner *
// MaxOwnersPerPage in all, the owners with the oldest tasks first.
const MaxOwnersPerPage = 16

// Pass is what one page of a dispatch pass found.
type Pass struct {
	PerOwner int // the tasks asked for of each owner
	Limit    int // the page size asked for
	Listed   int
	// Full says the queue may hold more than the page listed: an owner
	// had PerOwner tasks listed, or the page Limit.
	Full     bool
	Started  int
	Withheld int // tasks of this page left to other daemons
	Skipped  int
	Dropped  int
	Blocked  bool // no slot was left
}

// Again decides whether a pass lists another page after p, given how many
// tasks the previous page withheld: only if p was full and slots may
// remain (a full page means more tasks may be ready), and it
// started a task or found more withheld ones to look past, within
// MaxWithheldScan.
func Again(p Pass, withheldBefore int) bool {
	grew := p.Withheld > withheldBefore
	return !p.Blocked && (p.Started > 0 || grew) && p.Full && p.Withheld <= MaxWithheldScan
}

// Result is what one runOnce did: its pages, in order.
type Result struct{ Pages []Pass }

// Started counts the tasks the pass started.
func (r Result) Started() int {
	n := 0
	for _, p := range r.Pages {
		n += p.Started
	}
	return n
}

// Dispatcher is the dispatch service.
type Dispatcher struct {
	eng Engine
	*service.Loop
	// shares is the fair order's memory; only the loop's pass (or a
	// test's RunOnce, never beside it) touches it.
	shares *Shares
}

// New returns a dispatcher over eng, woken by wake and by clk's tick.
func New(eng Engine, clk clock.Clock, wake <-chan struct{}) *Dispatcher {
	d := &Dispatcher{eng: eng, shares: NewShares()}
	d.Loop = &service.Loop{ServiceName: "dispatcher", Clock: clk, Interval: eng.Tick, Wake: wake, Pass: func(ctx context.Context) { d.runOnce(ctx) }}
	return d
}

// RunOnce is one pass, for tests.
func (d *Dispatcher) RunOnce(ctx context.Context) Result { return d.runOnce(ctx) }

// runOnce leases as many ready tasks as there are free slots and slices,
// owner by owner in the fair order. Tasks refused for lack of a slot or
// in-flight budget stay queued until their queue deadline.
func (d *Dispatcher) runOnce(ctx context.Context) Result {
	var res Result
	defer d.shares.Prune()
	// withheld counts the tasks of the last page that this engine does
	// not serve every tool for: the next page lists that many more of
	// each owner, so a queue headed by other daemons' work does not hide
	// from this one the work it can take.
	withheld := 0
	for {
		free := d.eng.FreeSlots()
		if free <= 0 {
			return res
		}
		p := Pass{PerOwner: free + d.eng.InHand() + withheld}
		p.Limit = p.PerOwner * MaxOwnersPerPage
		tasks, err := d.eng.ListReady(ctx, p.PerOwner, p.Limit)
		if err != nil {
			if !service.Stopping(ctx) {
				d.eng.Error("listing ready tasks", "error", err)
			}
			return res
		}
		p.Listed = len(tasks)
		queues := byOwner(tasks)
		p.Full = p.Listed >= p.Limit
		for _, q := range queues.tasks {
			p.Full = p.Full || len(q) >= p.PerOwner
		}
		for len(queues.owners) > 0 {
			i := d.shares.Next(queues.owners)
			owner, t := queues.owners[i], queues.tasks[i][0]
			queues.pop(i)
			var started bool
			if p.Blocked, started = d.offer(ctx, t, &p); p.Blocked {
				break
			}
			if started {
				d.shares.Serve(owner, d.eng.Weight(owner))
			}
		}
		res.Pages = append(res.Pages, p)
		if !Again(p, withheld) {
			return res
		}
		withheld = p.Withheld
	}
}

// ownerQueues is a page's tasks by owner: owners in the order the page
// met them (their oldest task first), each one's tasks in page order.
type ownerQueues struct {
	owners []string
	tasks  [][]*store.Task
}

func byOwner(tasks []*store.Task) *ownerQueues {
	q := &ownerQueues{}
	at := map[string]int{}
	for _, t := range tasks {
		i, ok := at[t.Owner]
		if !ok {
			i = len(q.owners)
			at[t.Owner] = i
			q.owners = append(q.owners, t.Owner)
			q.tasks = append(q.tasks, nil)
		}
		q.tasks[i] = append(q.tasks[i], t)
	}
	return q
}

// pop takes owner i's first task off; an owner left with none leaves.
func (q *ownerQueues) pop(i int) {
	if q.tasks[i] = q.tasks[i][1:]; len(q.tasks[i]) == 0 {
		q.owners = append(q.owners[:i], q.owners[i+1:]...)
		q.tasks = append(q.tasks[:i], q.tasks[i+1:]...)
	}
}

// offer offers one task and counts what became of it; blocked when no
// slot is left, started when a worker holds it.
func (d *Dispatcher) offer(ctx context.Context, t *store.Task, p *Pass) (blocked, started bool) {
	switch d.eng.Offer(ctx, t) {
	case Started:
		p.Started++
		return false, true
	case Skipped:
		p.Skipped++
	case Dropped:
		p.Dropped++
	case Withheld:
		p.Withheld++
	case NoSlot:
		return true, false
	}
	return false, false
}
