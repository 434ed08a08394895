package engine

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weirhq/weir/runtime/internal/modelgate"
	"github.com/weirhq/weir/runtime/store"
)

// Histogram buckets, in seconds, chosen for the range each figure lives
// in (docs/operators.md, Metrics, lists them).
var (
	// WaitBuckets time a task's wait from ready to leased and a run's
	// wait from acceptance to its first lease: a millisecond on an idle
	// scheduler (a tick is 100 ms) up to the default queue deadline (10
	// minutes) and past it for operators who raise it.
	WaitBuckets = []float64{.001, .005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	// ExecBuckets time one try of a tool: a local call in a millisecond up
	// to a slow model turn or a crawl of several minutes.
	ExecBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// ResumeBuckets time a parked run's resumption, from its wake (a
	// child's end, a decision, a timer) to the lease that resumes it:
	// milliseconds to a scheduler tick (100 ms) while slots are free,
	// seconds when every slot is busy.
	ResumeBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// observations are the engine's latency distributions: the one record of
// each figure, exported to Prometheus as histograms (Engine.Histograms)
// and read back for the means of Stats.
type observations struct {
	toolWait      *prometheus.HistogramVec
	toolExec      *prometheus.HistogramVec
	admissionWait prometheus.Histogram
	resume        *prometheus.HistogramVec
}

func newObservations() observations {
	return observations{
		toolWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_tool_wait_seconds",
			Help:    "Time tasks of this type (a tool, or the node kind) waited from ready to leased: the wait for a slot and a budget slice.",
			Buckets: WaitBuckets,
		}, []string{"type"}),
		toolExec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_tool_exec_seconds",
			Help:    "Execution time of one try of this tool, retries counted one by one.",
			Buckets: ExecBuckets,
		}, []string{"type"}),
		admissionWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_run_admission_wait_seconds",
			Help:    "Time runs waited from acceptance to their first lease (queued to running).",
			Buckets: WaitBuckets,
		}),
		resume: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_resume_latency_seconds",
			Help:    "Time from a parked run's wake to the lease that resumes it, by what it waited for: child (a subflow), cohort (a fan-out), human.",
			Buckets: ResumeBuckets,
		}, []string{"wait"}),
	}
}

// Histograms returns the engine's latency histograms as one collector,
// for the daemon's Prometheus registry.
func (e *Engine) Histograms() prometheus.Collector { return histograms(e.stats.obs) }

type histograms observations

func (h histograms) Describe(ch chan<- *prometheus.Desc) {
	h.toolWait.Describe(ch)
	h.toolExec.Describe(ch)
	h.admissionWait.Describe(ch)
	h.resume.Describe(ch)
}

func (h histograms) Collect(ch chan<- prometheus.Metric) {
	h.toolWait.Collect(ch)
	h.toolExec.Collect(ch)
	h.admissionWait.Collect(ch)
	h.resume.Collect(ch)
}

// mean reads the mean of one histogram's observations (0 for none).
func mean(o prometheus.Observer) time.Duration {
	sum, n := sumCount(o)
	return meanOf(sum, n)
}

func meanOf(sum float64, n uint64) time.Duration {
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}

// sumCount reads a histogram's sum of observations, in seconds, and their
// count (0, 0 for none).
func sumCount(o prometheus.Observer) (float64, uint64) {
	m, ok := o.(prometheus.Metric)
	if !ok { // nil: nothing observed yet
		return 0, 0
	}
	var d dto.Metric
	if m.Write(&d) != nil {
		return 0, 0
	}
	return d.Histogram.GetSampleSum(), d.Histogram.GetSampleCount()
}

// stats keeps the four figures per task type of docs/design.md §4 plus
// engine-wide counters. The queue's depth per type is the store's, read
// at each history sample (queueDepths). It is display only: after a
// restart it starts from zero.
type stats struct {
	obs      observations
	mu       sync.Mutex
	types    map[string]*typeStats
	refusals map[string]int64
	counts   map[string]int64
	models   map[string]*ModelStats
	// depth is the queue's depth per type at the last sample.
	depth   map[string]int64
	history history
}

type typeStats struct {
	// wait and exec are made on first use, so that a node kind that
	// calls no tool has no execution series.
	wait, exec      prometheus.Observer
	attempts, units int64
	// overDeclared counts answers that reported a cost above the tool's
	// declared cost; overUnits sums the excess.
	overDeclared, overUnits int64
}

func newStats() *stats {
	return &stats{obs: newObservations(), types: map[string]*typeStats{}, refusals: map[string]int64{}, counts: map[string]int64{}, models: map[string]*ModelStats{}}
}

func (s *stats) typ(name string) *typeStats {
	t := s.types[name]
	if t == nil {
		t = &typeStats{}
		s.types[name] = t
	}
	return t
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// leased records a task's wait from ready to leased.
func (s *stats) leased(typ string, wait time.Duration) {
	s.mu.Lock()
	t := s.typ(typ)
	if t.wait == nil {
		t.wait = s.obs.toolWait.WithLabelValues(typ)
	}
	o := t.wait
	s.mu.Unlock()
	o.Observe(seconds(wait))
}

// started records a run's wait from acceptance to its first lease.
func (s *stats) started(wait time.Duration) { s.obs.admissionWait.Observe(seconds(wait)) }

// resumed records a parked run's resumption after its wake.
func (s *stats) resumed(waitKind string, latency time.Duration) {
	s.obs.resume.WithLabelValues(waitKind).Observe(seconds(latency))
}

// attempt counts one try of a logical tool call and its execution time.
func (s *stats) attempt(tool string, exec time.Duration) {
	s.mu.Lock()
	t := s.typ(tool)
	t.attempts++
	if t.exec == nil {
		t.exec = s.obs.toolExec.WithLabelValues(tool)
	}
	o := t.exec
	s.mu.Unlock()
	o.Observe(seconds(exec))
}

// unit counts one logical tool call reaching its end (any outcome).
func (s *stats) unit(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typ(tool).units++
}

// overDeclared counts an answer of tool that reported over units more
// than the tool declares: the tool's bug, which the run's budget pays.
func (s *stats) overDeclared(tool string, over int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.typ(tool)
	t.overDeclared++
	t.overUnits += over
}

func (s *stats) count(name string) {
	s.mu.Lock()
	s.counts[name]++
	s.mu.Unlock()
}

func (s *stats) refused(code string) {
	s.mu.Lock()
	s.refusals[code]++
	s.mu.Unlock()
}

func (s *stats) accepted()                 { s.count("accepted") }
func (s *stats) expired()                  { s.count("lease_expired") }
func (s *stats) deadLettered()             { s.count("dead_lettered") }
func (s *stats) finished(p store.Phase)    { s.count("finished_" + string(p)) }
func (s *stats) admissionBlocked(r string) { s.count("blocked_" + r) }

// eventsDropped counts events dropped to keep an owner's events within
// MaxOwnerEvents.
func (s *stats) eventsDropped(n int) {
	if n > 0 {
		s.mu.Lock()
		s.counts["events_dropped"] += int64(n)
		s.mu.Unlock()
	}
}

// TypeStats are the figures for one task type (a tool name, or the node
// kind for steps that call no tool). The means are read from the same
// observations as the Prometheus histograms.
type TypeStats struct {
	Type     string        `json:"type"`
	WaitMean time.Duration `json:"wait_mean_ns"`
	ExecMean time.Duration `json:"exec_mean_ns"`
	Attempts int64         `json:"attempts"`
	Units    int64         `json:"units"`
	// Amplification is attempts ÷ distinct work units (1 means no retry).
	Amplification float64 `json:"amplification"`
	// OverDeclared counts the tool's answers that reported a cost above
	// its declared cost, and OverUnits the units above it.
	OverDeclared int64 `json:"over_declared,omitempty"`
	OverUnits    int64 `json:"over_units,omitempty"`
	// QueueDepth is how many tasks of this type were ready and waiting
	// for a slot when the figures were last sampled (every
	// HistoryInterval; at most MaxQueueDepthTasks tasks are counted).
	QueueDepth int64 `json:"queue_depth"`
}

// MaxQueueDepthTasks bounds the ready tasks a sample reads to count the
// queue's depth per type, oldest first: past it the depths are a lower
// bound (Health.Queued still counts them all).
const MaxQueueDepthTasks = 1000

// queueDepths counts the ready tasks, by type, that no worker of this
// engine holds: the queue's depth per tool at now.
func (h sampleHost) queueDepths(ctx context.Context, now time.Time) map[string]int64 {
	e := h.e
	var tasks []*store.Task
	runs := map[string]*store.Run{}
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if tasks, err = tx.TaskListReady(now, MaxQueueDepthTasks); err != nil {
			return err
		}
		for _, t := range tasks {
			if t.Kind == store.TaskAgentCall || runs[t.RunID] != nil {
				continue
			}
			r, err := tx.RunGet(t.RunID)
			if errors.Is(err, store.ErrNotFound) {
				continue // finished and pruned since it was listed
			}
			if err != nil {
				return err
			}
			runs[t.RunID] = r
		}
		return nil
	}); err != nil {
		e.log.Warn("sampling the queue's depth", "error", err)
		return nil
	}
	out := map[string]int64{}
	for _, t := range tasks {
		taken := e.held.isDispatched(t.ID)
		run := runs[t.RunID]
		if taken || (run == nil && t.Kind != store.TaskAgentCall) {
			continue
		}
		_, typ := e.book.taskType(ctx, run, t)
		out[typ]++
	}
	return out
}

// ModelStats are the journaled model turns of agents per model: the
// model tool and the alias asked ("llm.chat/small").
type ModelStats struct {
	Model        string `json:"model"`
	Turns        int64  `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         int64  `json:"cost"`
	// Overspent is what turns were charged above their reservations.
	Overspent int64 `json:"overspent,omitempty"`
	// CutTurns is how many asks of the turns crashes may have cut off
	// before their answers were journaled, and CutReserved the upper
	// bound of their cost (store.AgentTurn.Cut).
	CutTurns    int64 `json:"cut_turns,omitempty"`
	CutReserved int64 `json:"cut_reserved,omitempty"`
	// RetriedTurns is how many tries of its turns failed and were tried
	// again since the daemon started, and RetriedInputTokens and
	// RetriedOutputTokens what the provider reported they used.
	RetriedTurns        int64 `json:"retried_turns,omitempty"`
	RetriedInputTokens  int64 `json:"retried_input_tokens,omitempty"`
	RetriedOutputTokens int64 `json:"retried_output_tokens,omitempty"`
	// The model's limits in force on this daemon (its share of the
	// fleet's; 0: none) and their use now: turns in flight, admitted in
	// the last minute with their tokens, in line, told to wait since the
	// daemon started, and until when the provider asked to wait.
	MaxConcurrent     int64     `json:"max_concurrent,omitempty"`
	RequestsPerMinute int64     `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64     `json:"tokens_per_minute,omitempty"`
	InFlight          int64     `json:"in_flight,omitempty"`
	StartedLastMinute int64     `json:"started_last_minute,omitempty"`
	TokensLastMinute  int64     `json:"tokens_last_minute,omitempty"`
	Booked            int64     `json:"booked,omitempty"`
	Waited            int64     `json:"waited,omitempty"`
	PausedUntil       time.Time `json:"paused_until,omitzero"`
}

// turn counts one journaled model turn t, charged cost on a reservation
// of reserved.
func (s *stats) turn(model string, t *store.AgentTurn, cost, reserved int64) {
	in, out := t.Usage.InputTokens, t.Usage.OutputTokens
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.models[model]
	if m == nil {
		m = &ModelStats{Model: model}
		s.models[model] = m
	}
	m.Turns++
	m.InputTokens += in
	m.OutputTokens += out
	m.Cost += cost
	m.Overspent += max(0, cost-reserved)
	m.CutTurns += int64(t.Cut)
	m.CutReserved += t.CutReserved
}

// withUse adds a model's use of its limits to its turns' figures.
func withUse(m ModelStats, u modelgate.Use) ModelStats {
	m.MaxConcurrent, m.RequestsPerMinute, m.TokensPerMinute = u.Limits.MaxConcurrent, u.Limits.RequestsPerMinute, u.Limits.TokensPerMinute
	m.InFlight, m.StartedLastMinute, m.TokensLastMinute = u.InFlight, u.Started, u.Tokens
	m.Booked, m.Waited, m.PausedUntil = u.Booked, u.Waited, u.PausedUntil
	return m
}

// turnRetried counts a failed try of one of model's turns that will be
// tried again, and what it reported it used.
func (s *stats) turnRetried(model string, used store.AgentUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.models[model]
	if m == nil {
		m = &ModelStats{Model: model}
		s.models[model] = m
	}
	m.RetriedTurns++
	m.RetriedInputTokens += used.InputTokens
	m.RetriedOutputTokens += used.OutputTokens
}

// Stats is a snapshot of the engine's figures.
type Stats struct {
	Types    []TypeStats      `json:"types"`
	Refusals map[string]int64 `json:"refusals"`
	Counts   map[string]int64 `json:"counts"`
	// Models are token and cost totals per model, by model name.
	Models []ModelStats `json:"models,omitempty"`
}

// Stats returns the four figures per task type and the engine counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Refusals: map[string]int64{}, Counts: map[string]int64{}}
	for k, v := range s.refusals {
		out.Refusals[k] = v
	}
	for k, v := range s.counts {
		out.Counts[k] = v
	}
	for name, t := range s.types {
		ts := TypeStats{Type: name, WaitMean: mean(t.wait), ExecMean: mean(t.exec), Attempts: t.attempts, Units: t.units,
			OverDeclared: t.overDeclared, OverUnits: t.overUnits, QueueDepth: s.depth[name]}
		if t.units > 0 {
			ts.Amplification = float64(t.attempts) / float64(t.units)
		}
		out.Types = append(out.Types, ts)
	}
	for name, d := range s.depth {
		if s.types[name] == nil { // queued, never leased yet
			out.Types = append(out.Types, TypeStats{Type: name, QueueDepth: d})
		}
	}
	sort.Slice(out.Types, func(i, j int) bool { return out.Types[i].Type < out.Types[j].Type })
	uses := map[string]modelgate.Use{}
	for _, u := range e.models.Uses(e.clock.Now()) {
		uses[u.Model] = u
	}
	for name, m := range s.models {
		out.Models = append(out.Models, withUse(*m, uses[name]))
		delete(uses, name)
	}
	for name, u := range uses { // waited, none journaled yet
		out.Models = append(out.Models, withUse(ModelStats{Model: name}, u))
	}
	sort.Slice(out.Models, func(i, j int) bool { return out.Models[i].Model < out.Models[j].Model })
	return out
}

// LivePhases are the non-terminal phases RunPhases counts: finished runs
// are counted as they finish (Stats.Counts), not re-read from the store.
var LivePhases = []store.Phase{store.PhaseQueued, store.PhaseRunning, store.PhaseWaiting, store.PhaseCompleting}

// RunPhases counts the stored runs in each live phase, for every daemon
// sharing the store. A store that is a store.RunCounter counts without
// reading records; another lists them.
func (e *Engine) RunPhases(ctx context.Context) (map[store.Phase]int, error) {
	out := make(map[store.Phase]int, len(LivePhases))
	err := e.st.View(ctx, func(tx store.Tx) error {
		for _, p := range LivePhases {
			if rc, ok := baseTx(tx).(store.RunCounter); ok {
				n, err := rc.RunCount(p)
				if err != nil {
					return err
				}
				out[p] = n
				continue
			}
			runs, err := tx.RunList(store.RunListParams{Phase: p})
			if err != nil {
				return err
			}
			out[p] = len(runs)
		}
		return nil
	})
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	return out, nil
}

// The stats history: the daemon's figures sampled at a fixed interval
// over the last hour, kept in memory only (a restart starts it empty), for
// the console's charts.
const (
	// HistoryInterval is how often the figures are sampled.
	HistoryInterval = 10 * time.Second
	// HistoryWindow is how far back the samples reach.
	HistoryWindow = time.Hour
	// historySamples is the ring's size: one window of samples.
	historySamples = int(HistoryWindow / HistoryInterval)
)

// Sample is the daemon's figures at one moment of the history: the
// status (admission, slots, queued, parked and held tasks) at At, and the
// tools' and models' figures over the interval that ended at At — means
// of that interval's observations and counts of its attempts, units,
// turns, tokens and cost — so that a chart shows change, not totals.
type Sample struct {
	At     time.Time    `json:"at"`
	Health Health       `json:"health"`
	Types  []TypeStats  `json:"types"`
	Models []ModelStats `json:"models,omitempty"`
}

// history is a ring of the last historySamples samples, and the totals at
// the last sample from which the next one's interval figures are taken.
type history struct {
	mu    sync.Mutex
	ring  []Sample
	next  int // where the next sample goes once the ring is full
	prev  map[string]typeTotals
	prevM map[string]ModelStats
}

type typeTotals struct {
	waitSum, execSum float64
	waitN, execN     uint64
	attempts, units  int64
}

// add keeps s, dropping the oldest sample once the ring is full.
func (h *history) add(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ring) < historySamples {
		h.ring = append(h.ring, s)
		return
	}
	h.ring[h.next] = s
	h.next = (h.next + 1) % historySamples
}

// samples returns the kept samples, oldest first.
func (h *history) samples() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Sample, 0, len(h.ring))
	out = append(out, h.ring[h.next:]...)
	return append(out, h.ring[:h.next]...)
}

// StatsHistory returns the samples of the last HistoryWindow, oldest
// first: kept in memory, empty after a restart.
func (e *Engine) StatsHistory() []Sample { return e.stats.history.samples() }

// sampleHost is the engine's side of the sampler (internal/sampler).
type sampleHost struct{ e *Engine }

// Sample takes the figures at at into the history.
func (h sampleHost) Sample(ctx context.Context, at time.Time) {
	health := h.e.Health(ctx)
	h.e.stats.history.add(h.e.stats.interval(at, health, h.queueDepths(ctx, at)))
}

// Tick is the scheduler's tick.
func (h sampleHost) Tick() time.Duration { return h.e.cfg.Load().Tick }

// interval takes the figures since the previous sample, and the queue's
// depth per type at it.
func (s *stats) interval(at time.Time, health Health, depth map[string]int64) Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.depth = depth
	h := &s.history
	out := Sample{At: at.UTC(), Health: health, Types: []TypeStats{}}
	cur := make(map[string]typeTotals, len(s.types))
	for name, t := range s.types {
		var c typeTotals
		c.waitSum, c.waitN = sumCount(t.wait)
		c.execSum, c.execN = sumCount(t.exec)
		c.attempts, c.units = t.attempts, t.units
		cur[name] = c
		p := h.prev[name]
		ts := TypeStats{Type: name, WaitMean: meanOf(c.waitSum-p.waitSum, c.waitN-p.waitN), ExecMean: meanOf(c.execSum-p.execSum, c.execN-p.execN),
			Attempts: c.attempts - p.attempts, Units: c.units - p.units, QueueDepth: depth[name]}
		if ts.Units > 0 {
			ts.Amplification = float64(ts.Attempts) / float64(ts.Units)
		}
		out.Types = append(out.Types, ts)
	}
	for name, d := range depth {
		if s.types[name] == nil {
			out.Types = append(out.Types, TypeStats{Type: name, QueueDepth: d})
		}
	}
	sort.Slice(out.Types, func(i, j int) bool { return out.Types[i].Type < out.Types[j].Type })
	curM := make(map[string]ModelStats, len(s.models))
	for name, m := range s.models {
		curM[name] = *m
		p := h.prevM[name]
		out.Models = append(out.Models, ModelStats{Model: name, Turns: m.Turns - p.Turns, InputTokens: m.InputTokens - p.InputTokens,
			OutputTokens: m.OutputTokens - p.OutputTokens, Cost: m.Cost - p.Cost, Overspent: m.Overspent - p.Overspent,
			CutTurns: m.CutTurns - p.CutTurns, CutReserved: m.CutReserved - p.CutReserved})
	}
	sort.Slice(out.Models, func(i, j int) bool { return out.Models[i].Model < out.Models[j].Model })
	h.prev, h.prevM = cur, curM
	return out
}
