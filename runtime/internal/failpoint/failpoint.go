// Package failpoint kills the process at named durable boundaries so that
// crash tests can prove recovery at every one of them. A failpoint is armed
// by the environment variable WEIR_FAILPOINT, a comma-separated list of
// names; each name may carry "@N" to fire on its N-th hit (default 1st).
// An armed failpoint sends SIGKILL to its own process: no deferred function,
// no flush, exactly like an operator's kill -9.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Names of the engine's failpoints, one per durable boundary.
const (
	AfterAccept     = "after-accept"      // acceptance record durable, answer not sent
	AfterStarted    = "after-started"     // non-idempotent "started" durable, tool not called
	AfterTool       = "after-tool"        // tool returned, result not written
	AfterResult     = "after-result"      // step result durable
	MidFinish       = "mid-finish"        // finish decided, terminal record not written
	ChildNoAnnounce = "child-no-announce" // child finished without waking its parent (not a kill)
	CohortCutoff    = "cohort-cutoff"     // cohort closing with its cutoff durable, not reduced
	ReduceCanonical = "reduce-canonical"  // canonical state durable, derived state not
	ReduceDerived   = "reduce-derived"    // derived state durable, marker not written
	ForkRead        = "fork-read"         // a fork's source read and its copy planned, nothing written
	AfterFork       = "after-fork"        // a fork durable (run, copied journal, events), answer not sent
	// DropAccepted answers "accepted" without writing the run: a
	// deliberate loss that the soak's "none lost" check must catch. It
	// exists to prove that check can fail; never arm it elsewhere.
	DropAccepted = "drop-accepted"
)

// Failpoints of the dead-letter operations (engine redrive.go).
const (
	// ExhaustedParked: a task's dead letter and its run's park on an
	// exhausted wait are durable (one transaction), or a fan-out item's
	// dead letter and its park in flight.
	ExhaustedParked = "exhausted-parked"
	// AfterRedrive: one task's redrive is durable, the rest of its batch
	// and the answer are not.
	AfterRedrive = "after-redrive"
)

// Failpoints of resolving an unknown outcome (engine resolve.go).
const (
	// UnknownParked: the run's park on an unknown wait is durable.
	UnknownParked = "unknown-parked"
	// BeforeResolve: a resolve's writes are made and not committed.
	BeforeResolve = "before-resolve"
	// AfterResolve: a resolve is durable, the run not yet woken.
	AfterResolve = "after-resolve"
)

// Failpoints of migrating a parked run to another version (engine
// migrate.go).
const (
	// BeforeMigrate: a migration's writes are made and not committed.
	BeforeMigrate = "before-migrate"
	// AfterMigrate: a migration is durable, the answer not sent.
	AfterMigrate = "after-migrate"
)

// Failpoints of deciding a wait (engine wait.go) and of an agent's
// decided calls (engine agent.go).
const (
	// AfterDecide: a decision is durable, the run not yet woken.
	AfterDecide = "after-decide"
	// AgentCallsQueued: an agent's call tasks (an edited call's with its
	// arguments) and the decisions they consumed are durable; no call
	// has been made.
	AgentCallsQueued = "agent-calls-queued"
	// AgentCallEnded: an agent's tool call's end is durable in its turn
	// record (and its agent woken); the agent has not looked at it.
	AgentCallEnded = "agent-call-ended"
	// RunawayParked: an agent's runaway guard tripped and the run's park
	// on its runaway wait is durable.
	RunawayParked = "runaway-parked"
	// AfterBudgetAdd: a raise of a run's budget (and its wake) is
	// durable; its answer is not sent.
	AfterBudgetAdd = "after-budget-add"
)

// Failpoints of the schedule service (engine/internal/schedules).
const (
	// ScheduleDecided: a pass decided to fire a tick; its run is not
	// accepted yet.
	ScheduleDecided = "schedule-decided"
	// ScheduleFired: a tick's run is accepted; the schedule's next tick
	// is not stored yet.
	ScheduleFired = "schedule-fired"
)

// Failpoints of events (engine eventsend.go).
const (
	// EventAccepted: an event and its deliveries to open waits are
	// durable; its triggers' runs are not started yet.
	EventAccepted = "event-accepted"
	// EventTriggered: an event's triggers' runs are started; the event
	// is not yet marked as done with them.
	EventTriggered = "event-triggered"
)

var (
	once  sync.Once
	mu    sync.Mutex
	armed map[string]int // name → hit number that fires
	hits  map[string]int
)

func load() {
	armed, hits = map[string]int{}, map[string]int{}
	for _, f := range strings.Split(os.Getenv("WEIR_FAILPOINT"), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, n := f, 1
		if i := strings.IndexByte(f, '@'); i >= 0 {
			name = f[:i]
			if v, err := strconv.Atoi(f[i+1:]); err == nil && v > 0 {
				n = v
			}
		}
		armed[name] = n
	}
}

// Armed reports whether name is armed and this is the hit that fires. It
// counts the hit. Non-killing failpoints (ChildNoAnnounce) use it directly.
func Armed(name string) bool {
	once.Do(load)
	mu.Lock()
	defer mu.Unlock()
	n, ok := armed[name]
	if !ok {
		return false
	}
	hits[name]++
	return hits[name] == n
}

// Hit kills the process with SIGKILL if name is armed for this hit.
func Hit(name string) {
	if Armed(name) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is delivered; never return into the caller
	}
}
