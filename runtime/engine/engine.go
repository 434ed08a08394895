package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/registry"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/internal/ledger"
	"github.com/weirhq/weir/runtime/internal/modelgate"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/tool"
)

// Tools is what the engine needs from the plugin host (or from an
// in-process stand-in in tests): calls, and what each tool declares.
type Tools interface {
	Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error)
	LookupTool(name string) (flows.ToolInfo, bool)
}

// Config is the engine's configuration. Zero values take the defaults
// named beside each field, which DefaultConfig returns. Limits can be changed while running with Reload.
type Config struct {
	Store  store.Store
	Tools  Tools
	Logger hclog.Logger
	// HostID names the host whose plugin state Tools keep, the same
	// across restarts (the daemon's data directory); "": this process
	// alone. A started record carries it, and a reconcile probe's
	// not_happened is acted on only on the host that made the call.
	HostID string
	// Clock is the engine's one source of time: the scheduler's tick,
	// lease deadlines and renewal, retry backoff, queue deadlines, waits
	// and a cohort's fuse and grace all read it (nil: the wall clock).
	// A tool call's own deadline is wall time: the plugin enforces it.
	Clock clock.Clock

	// Workers is the number of worker slots (default 64).
	Workers int
	// SpareWorkers is how many more tasks may run for owners holding no
	// slot (default: an eighth of Workers, at least 1; negative: none),
	// so that an owner's first task never waits behind another owner's
	// tasks holding every slot (ledger.Ledger).
	SpareWorkers int
	// MaxBudgetInFlight caps the cost units reserved by running tasks at
	// once, engine-wide (0: unlimited).
	MaxBudgetInFlight int64
	// MaxQueued caps runs accepted but not yet started; beyond it new runs
	// are refused with E_QUEUE_FULL (default 10,000).
	MaxQueued int
	// QueueTimeout is how long a task may wait for a slot and a budget
	// slice before it is dropped with E_QUEUE_TIMEOUT (default 10m; a
	// negative value means no deadline).
	QueueTimeout time.Duration
	// LeaseTimeout is a lease's deadline; holders renew at a third of it
	// (default 30s).
	LeaseTimeout time.Duration
	// MaxAttempts bounds how many times a task's lease may be lost (crash,
	// expiry) before it is dead-lettered (default 5).
	MaxAttempts int
	// RetryBase and RetryMax shape the exponential backoff with full
	// jitter between tries of a retryable tool error (defaults 100ms, 30s).
	RetryBase, RetryMax time.Duration
	// DefaultRunBudget applies to flows that declare no budget (0:
	// unlimited).
	DefaultRunBudget int64
	// Tick is the scheduler's timer for parked tasks coming due and lease
	// expiry (default 100ms). Wake-ups (new runs, freed slots, a child
	// finishing) never wait for it.
	Tick time.Duration
	// ConfigVersion is recorded on every start event.
	ConfigVersion int64
	// Retention prunes runs (with their events, dedup keys and records)
	// that finished longer ago than this; 0 keeps everything.
	Retention time.Duration
	// EventRetention is how long an owner's event is kept for a wait
	// that opens after it (0: DefaultEventRetention).
	EventRetention time.Duration
	// MinFreeBytes is the disk watermark: while DiskFree reports less,
	// new runs and registrations are refused with E_DISK_FULL (work in
	// hand goes on), and admission reopens by itself once space returns.
	// 0, or a nil DiskFree: no check.
	MinFreeBytes int64
	// DiskFree reports the bytes free on the store's disk.
	DiskFree func() (int64, error)
	// FlowCacheBytes bounds the memory of loaded flow versions (decoded
	// IR and evaluators, charged as estimated by script.Cache); the least
	// recently used are dropped and re-loaded from the store when needed
	// again (default script.DefaultCacheBytes, 256 MiB).
	FlowCacheBytes int64
	// Owners gives owners their shares and quotas (owners.go); an owner
	// without an entry gets DefaultOwner, each its own share.
	Owners       map[string]OwnerShare
	DefaultOwner OwnerShare
	// Scripts evaluates flow scripts: registration's load and checks and
	// the callables of every step (nil: in this process, with the flow
	// cache keeping evaluators). The daemon passes a runtime/sandbox
	// Pool, so that a script bomb kills a worker, not the engine.
	Scripts flows.Scripts
	// Traces, if set, exports each finished run's trace (traces.go,
	// runtime/telemetry): the daemon sets it when its telemetry block or
	// the OTEL_EXPORTER_OTLP_* variables name an endpoint. Nil costs
	// nothing: no outbox entry is written and no service runs.
	Traces TraceExporter
}

// DefaultConfig returns the limits a zero Config field takes: the one
// place the engine's defaults are written. A daemon's config shows these
// values in force rather than zeros, so it reads them from here.
func DefaultConfig() Config {
	return Config{
		Workers:        64,
		MaxQueued:      10000,
		QueueTimeout:   10 * time.Minute,
		LeaseTimeout:   30 * time.Second,
		MaxAttempts:    5,
		RetryBase:      100 * time.Millisecond,
		RetryMax:       30 * time.Second,
		Tick:           100 * time.Millisecond,
		FlowCacheBytes: script.DefaultCacheBytes,
		EventRetention: DefaultEventRetention,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.SpareWorkers == 0 {
		c.SpareWorkers = (c.Workers + 7) / 8
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = d.MaxQueued
	}
	if c.QueueTimeout == 0 {
		c.QueueTimeout = d.QueueTimeout
	}
	if c.LeaseTimeout <= 0 {
		c.LeaseTimeout = d.LeaseTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.RetryBase <= 0 {
		c.RetryBase = d.RetryBase
	}
	if c.RetryMax <= 0 {
		c.RetryMax = d.RetryMax
	}
	if c.Tick <= 0 {
		c.Tick = d.Tick
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.FlowCacheBytes <= 0 {
		c.FlowCacheBytes = d.FlowCacheBytes
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}

// Engine runs flows durably. Create it with Open, then Start it.
type Engine struct {
	st store.Store // the backend, wrapped to wake runs' watchers (watch.go)
	// watchers are the waits on runs this engine tells of its commits.
	watchers runWatchers
	// hearsFinishes: the shared store announces every run's end
	// (store.Wake.FinishedRunID) and the wake follower passes it to the
	// watchers; set before the services start.
	hearsFinishes bool
	tools         Tools
	log           hclog.Logger
	holder        string // identifies this process's leases
	ledger        *ledger.Ledger
	cfg           atomic.Pointer[Config]
	// registry checks and stores flow versions; it serialises
	// registrations so two cannot together close a subflow cycle.
	registry *registry.Registry
	// scripts evaluates flow scripts (Config.Scripts).
	scripts flows.Scripts
	// admission is the gate acceptance passes (admission.go).
	admission *admissionGate
	// auditor records refused callers in the audit stream (audit.go).
	auditor *auditor
	// book loads, validates and prices flow versions (flowcache.go).
	book *flowBook
	// journal writes runs' transitions in a transaction (finish.go).
	journal *journal
	// agents keeps agent visits' final turns between their steps
	// (agentmemo.go).
	agents *agentMemo
	// registrar stores registered versions (register.go).
	registrar *registrar
	queued    queuedRuns // accepted runs not yet leased once
	// owners is admission's door for the owners' own quotas, and each
	// owner's spend in the last hour (ownerquota.go).
	owners *ownerDoor

	// wake starts a dispatch pass (kick); services are the background
	// work Start starts and Stop stops (services.go).
	wake     wakeup
	services service.Supervisor
	wg       sync.WaitGroup // workers

	// held is the work this process's workers hold (live.go).
	held *liveWork
	// deltas are the watchers of runs' model turns as they stream and
	// the text of the turns in flight (deltas.go).
	deltas *TurnDeltas
	// models admits model turns against their models' provider limits
	// (agentadmit.go).
	models *modelgate.Gate
	// draining is set once Stop begins: interrupted work is given back
	// to the queue, recorded, instead of left for the lease rescuer.
	draining atomic.Bool
	// startedAt is when Start began (unix nanoseconds of the engine's
	// clock): a task's wait for a slot counts from it at the earliest,
	// so a daemon's downtime (an upgrade, say) is not queue time.
	startedAt atomic.Int64
	flowCache *script.Cache // loaded flow versions, bounded by FlowCacheBytes

	// The fleet's roll (roll.go): when this engine last renewed its entry
	// (unix nanoseconds) and the live entries it last read; the tools it
	// last reported and the runs it withholds are held work's (live.go).
	roll *fleetRoll

	stats *stats
	clock clock.Clock
}

// liveRun is a run (or a fan-out child) held by a worker of this process.
type liveRun struct {
	runID           string // the run the work is for (a fan-out child's parent)
	mu              sync.Mutex
	completing      bool // the finish decision is made
	cancelRequested bool
	cancel          context.CancelFunc
	// protected is set while the worker runs a node that declares
	// protected work: a drain never kills it.
	protected atomic.Bool
	// progress is the running tool call's last progress report (display
	// only, lost with the process).
	progress atomic.Pointer[ToolProgress]
	// evalCtx is the context the work's callables are evaluated under,
	// which nothing but abandon ends (a run's cancel is decided between
	// evaluations), so that a callable spinning to its deadline does not
	// hold a drain past its grace. evalCut is set when an evaluation
	// ended for it (flowEntry.callBatch): its error is not the node's,
	// and the work writes nothing more (workFenceTx; the task is handed
	// back as any drained one).
	evalCtx  context.Context
	stopEval context.CancelFunc
	evalCut  atomic.Bool
}

// liveKey carries the liveRun on an evaluation's context.
type liveKey struct{}

// noteEvalCut records, when ctx is an evaluation context whose work was
// abandoned, that an evaluation was cut by it.
func noteEvalCut(ctx context.Context) {
	if lr, ok := ctx.Value(liveKey{}).(*liveRun); ok && ctx.Err() != nil {
		lr.evalCut.Store(true)
	}
}

// newLiveRun is the live record of work for runID, cancelled by cancel.
func newLiveRun(runID string, cancel context.CancelFunc) *liveRun {
	ctx, stop := context.WithCancel(context.Background())
	return &liveRun{runID: runID, cancel: cancel, evalCtx: ctx, stopEval: stop}
}

// abandon ends the work at a drain's grace: its calls and evaluations
// are cut.
func (l *liveRun) abandon() {
	if l.stopEval != nil {
		l.stopEval()
	}
	l.cancel()
}

// The liveRun's lock is taken only by its methods below.

// requestCancel marks the run cancel-requested unless its finish decision
// is made or it knew already, and says whether it marked it.
func (l *liveRun) requestCancel() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	act := !l.completing && !l.cancelRequested
	if act {
		l.cancelRequested = true
	}
	return act
}

// markCancelled marks the run cancel-requested, whatever it knew.
func (l *liveRun) markCancelled() {
	l.mu.Lock()
	l.cancelRequested = true
	l.mu.Unlock()
}

func (l *liveRun) isCancelRequested() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancelRequested
}

func (l *liveRun) isCompleting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.completing
}

// decideFinish makes the finish decision: after it a cancel is too late.
// A cancel requested before it turns any end but completed into
// cancelled; decideFinish returns the phase to record.
func (l *liveRun) decideFinish(phase store.Phase) store.Phase {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancelRequested && phase != store.PhaseCompleted {
		phase = store.PhaseCancelled
	}
	l.completing = true
	return phase
}

// holdForCancel keeps the finish decision from being made until release
// is called (Cancel holds it until its request is durable), unless it is
// made already: then completing is true and there is nothing to release.
// release(true) marks the run cancel-requested as it lets go, so that
// whoever waited on the hold sees the cancel.
func (l *liveRun) holdForCancel() (completing bool, release func(requested bool)) {
	l.mu.Lock()
	if l.completing {
		l.mu.Unlock()
		return true, nil
	}
	return false, func(requested bool) {
		if requested {
			l.cancelRequested = true
		}
		l.mu.Unlock()
	}
}

// ToolProgress is what a running tool last reported through the SDK.
type ToolProgress struct {
	Node string `json:"node"`
	// Item is the fan-out item whose call this is (nil for a task node).
	Item  *int   `json:"item,omitempty"`
	Tool  string `json:"tool"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// Open builds an engine over cfg.Store. It does not start scheduling.
func Open(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("engine: Config.Store is required")
	}
	if cfg.Tools == nil {
		return nil, errors.New("engine: Config.Tools is required")
	}
	c := cfg.withDefaults()
	e := &Engine{
		tools:     c.Tools,
		log:       c.Logger,
		holder:    newID("h"),
		ledger:    ledger.New(c.Workers, c.SpareWorkers, c.MaxBudgetInFlight),
		wake:      make(wakeup, 1),
		held:      newLiveWork(),
		deltas:    newTurnDeltas(),
		models:    modelgate.New(),
		queued:    queuedRuns{},
		flowCache: script.NewCache(c.FlowCacheBytes, script.Loader{}),
		stats:     newStats(),
		clock:     c.Clock,
		agents:    newAgentMemo(agentMemoBytes),
	}
	e.roll = &fleetRoll{e: e}
	e.st = watchedStore{Store: c.Store, w: &e.watchers}
	e.owners = &ownerDoor{st: e.st, clock: c.Clock, stats: e.stats}
	e.scripts = c.Scripts
	if e.scripts == nil {
		e.scripts = script.Local{Cache: e.flowCache}
	}
	e.registry = registry.NewRegistryScripts(versionStore{st: c.Store, cache: e.flowCache, clock: c.Clock}, c.Tools, e.scripts)
	// A registration of files already checked, against unchanged tools
	// and callees, skips its scripts (a CI job registering a repository
	// of which one file changed); the checks share the flow cache's bound.
	e.registry.KeepChecks(e.flowCache)
	e.admission = &admissionGate{log: c.Logger, clock: c.Clock, cfg: &e.cfg}
	e.auditor = &auditor{st: e.st, log: c.Logger, clock: c.Clock, cfg: &e.cfg}
	e.book = &flowBook{st: e.st, cache: e.flowCache, scripts: e.scripts, tools: c.Tools, log: c.Logger, cfg: &e.cfg, admission: e.admission}
	e.journal = &journal{clock: c.Clock, traced: c.Traces != nil}
	e.registrar = &registrar{st: e.st, clock: c.Clock, log: c.Logger, admission: e.admission, auditor: e.auditor, roll: e.roll}
	e.cfg.Store(&c)
	// The spare slots go to owners below their weighted share.
	e.ledger.SetWeights(func(o string) int { return e.cfg.Load().ShareOf(o).Weight })
	return e, nil
}

// Reload swaps the limits. Lowering Workers or MaxBudgetInFlight only
// limits new starts; work in hand is never taken back (docs/design.md §8).
func (e *Engine) Reload(cfg Config) {
	old := e.cfg.Load()
	c := cfg.withDefaults()
	c.Store, c.Tools, c.Logger, c.Clock, c.Scripts, c.DiskFree = old.Store, old.Tools, old.Logger, old.Clock, old.Scripts, old.DiskFree
	c.Traces = old.Traces // its service and the journal's outbox were set up at start
	// The host id is this daemon's identity, not a limit: the holder of
	// its service leases and the host its started records name.
	c.HostID = old.HostID
	e.cfg.Store(&c)
	e.ledger.Resize(c.Workers, c.SpareWorkers, c.MaxBudgetInFlight)
	e.flowCache.SetMaxBytes(c.FlowCacheBytes)
	e.wake.kick()
}

// Start recovers from the store and starts the background services
// (services.go). It returns after recovery; the services run until Stop.
func (e *Engine) Start(ctx context.Context) error {
	e.startedAt.Store(e.clock.Now().UnixNano())
	if err := e.recover(ctx); err != nil {
		return fmt.Errorf("engine: recovery: %w", err)
	}
	if err := e.ReportTools(ctx); err != nil {
		return fmt.Errorf("engine: writing this daemon's entry in the fleet's roll: %w", err)
	}
	if err := e.services.Start(ctx, services(e)...); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.wake.kick()
	return nil
}

// LockLostReason is the refusal every start gets once the store's lock is
// gone (store.LockHolder).
const LockLostReason = "the store's lock session ended: another daemon may hold the store now; this daemon stops (start it again once no other daemon uses the store unshared)"

// wakeup starts a dispatch pass: a new run, a freed slot, a child
// finishing send on it; the dispatcher's tick is the fallback.
type wakeup chan struct{}

// kick wakes the dispatcher without blocking.
func (w wakeup) kick() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Stop closes admission (new starts get E_DRAINING) under the same gate
// acceptance takes, stops dispatching, and lets held work drain until ctx
// ends. Then it cancels the calls of unprotected work; each interrupted
// task is given back to the queue with its record written (it resumes at
// the next start with attempt + 1). Protected work is never killed: Stop
// waits for it. Stop returns when every worker has written its records.
func (e *Engine) Stop(ctx context.Context) error {
	e.admission.close(CodeDraining, "the engine is stopping")
	e.draining.Store(true)
	e.roll.leave(ctx)
	e.services.Stop() // the dispatcher first: no new dispatch
	drained := make(chan struct{})
	go func() { e.wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
		e.held.cancelUnprotected()
		<-drained
	}
	return nil
}

// Health says whether admission is open and, if not, why.
type Health struct {
	Admission string `json:"admission"` // "open" or the refusal code
	Reason    string `json:"reason,omitempty"`
	// Queued counts the tasks ready to run that no worker holds yet;
	// Parked the ones waiting for a wake (a person's decision, a child
	// run, a timer), which are not queued for anything.
	Queued int `json:"queued"`
	Parked int `json:"parked"`
	Held   int `json:"held"`
	Slots  int `json:"slots"`
}

// Health reports admission state and the queued and held task counts.
func (e *Engine) Health(ctx context.Context) Health {
	h := Health{Admission: "open"}
	if code, why := e.admission.state(); code != "" {
		h.Admission, h.Reason = code, why
	}
	if h.Admission == "open" {
		if err := e.admission.checkDisk(); err != nil {
			h.Admission, h.Reason = err.Code, err.Message
		}
	}
	_ = e.st.View(ctx, func(tx store.Tx) error {
		q, l, err := tx.TaskCount()
		h.Queued, h.Held = q, l
		return err
	})
	h.Slots = e.ledger.Snapshot().Slots
	h.Queued, h.Parked = splitParked(ctx, e.st, e.clock.Now(), h.Queued)
	return h
}

// newID returns a random identifier with a readable prefix.
func newID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// mustJSON marshals values the engine built itself.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal %T: %v", v, err))
	}
	return b
}
