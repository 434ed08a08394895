// Package metrics exports the daemon's figures to Prometheus: the figures
// per tool of docs/design.md §4 (tries, logical calls, retry
// amplification), runs accepted and finished by phase, the runs in each
// live phase, admissions refused by reason, the admission state with the
// queued and held task counts, plugin restarts, the config version,
// agents' model turns, tokens and cost per model, and the script
// sandbox's workers started and killed by limit.
//
// Counters and gauges are read from the engine's snapshot at scrape time
// (a custom Collector), so scraping costs the engine nothing between
// scrapes. Distributions are histograms observed where they happen and
// registered beside this collector: the engine's waits, execution times
// and resume latency (engine.Engine.Histograms) and the store's commit
// latency (package storemetrics). Counters restart from zero with the
// daemon.
package metrics

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	weirflows "github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/ledger"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
)

// Engine is what the collector reads from the engine.
type Engine interface {
	Stats() engine.Stats
	Health(ctx context.Context) engine.Health
	RunPhases(ctx context.Context) (map[store.Phase]int, error)
}

// Sources are where the collector reads its figures at each scrape.
type Sources struct {
	Engine Engine
	// Restarts returns plugin restarts by plugin name (host.Restarts).
	Restarts func() map[string]int64
	// ConfigVersion returns the version of the config in force.
	ConfigVersion func() int64
	// Sandbox returns the script sandbox's counters (sandbox.Pool.Stats).
	Sandbox func() sandbox.Stats
	// Owners returns each owner's use and share (engine.OwnerStats with
	// owner ""); nil: no weir_owner_* series.
	Owners func(ctx context.Context) ([]engine.OwnerStats, error)
	// Models returns the label of every model agents may use,
	// "TOOL/ALIAS" as weir_model_* name them, so that each has its series
	// from the first scrape; nil: only models that ran a turn.
	Models func() []string
	// TraceDropped returns the spans the trace exporter dropped
	// (telemetry.Exporter.Dropped); nil: tracing is off, and the series
	// is 0.
	TraceDropped func() int64
}

// Label values known before their first event: each labelled counter has
// their series from the first scrape, at 0, so that rate(), increase()
// and an alert on a series work before the first event instead of
// finding no series.
var (
	knownRefusals = []string{engine.CodeQueueFull, engine.CodeQueueTimeout}
	knownBlocked  = []string{string(ledger.NoSlot), string(ledger.NoBudgetInFlight), string(ledger.RunBudgetExhausted)}
	knownLimits   = []weirflows.Limit{weirflows.LimitMemory, weirflows.LimitTime, weirflows.LimitDepth, weirflows.LimitSize}
)

// Collector is a prometheus.Collector over the engine's snapshot.
type Collector struct {
	src Sources
}

// NewCollector returns a collector reading src.
func NewCollector(src Sources) *Collector { return &Collector{src: src} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("weir_"+name, help, labels, nil)
}

var (
	toolAttempts      = desc("tool_attempts_total", "Tries of calls of this tool, retries included.", "type")
	toolUnits         = desc("tool_units_total", "Logical calls of this tool that reached an end, whatever the outcome.", "type")
	toolOverDeclared  = desc("tool_cost_over_declared_total", "Answers of this tool that reported a cost above its declared cost (the tool's bug; the run is charged and its next work refused if it no longer fits).", "type")
	toolOverUnits     = desc("tool_cost_over_declared_units_total", "Budget units this tool reported above its declared cost.", "type")
	modelOverspent    = desc("model_overspent_total", "Budget units agent model turns were charged above their reservations (usage past the estimate), by model.", "model")
	toolAmplification = desc("tool_retry_amplification", "Tries per logical call of this tool (1: no retries).", "type")
	runsAccepted      = desc("runs_accepted_total", "Runs accepted (journal written) since the daemon started.")
	runsLive          = desc("runs", "Runs in the store in each live phase (queued, running, waiting, completing), counted at scrape time.", "phase")
	runsFinished      = desc("runs_finished_total", "Runs that reached a terminal phase since the daemon started, by phase.", "phase")
	leasesExpired     = desc("leases_expired_total", "Leases that expired and were rescued since the daemon started.")
	deadLetters       = desc("dead_letters_total", "Tasks dead-lettered since the daemon started.")
	eventsDropped     = desc("events_dropped_total", "Events dropped unreceived to keep an owner's events within their bound (10,000), since the daemon started.")
	refused           = desc("admission_refused_total", "Starts refused at admission, by refusal code.", "reason")
	blocked           = desc("admission_blocked_total", "Times the scheduler found no slot or budget for a ready task, by what was missing.", "reason")
	admissionOpen     = desc("admission_open", "1 while admission is open; 0 while draining or after a storage failure.")
	admissionState    = desc("admission_state", "1 for the admission state in force: open, E_DRAINING or E_STORAGE.", "state")
	tasks             = desc("tasks", "Tasks in the store: queued (not held, parked included) and held by a worker.", "state")
	slots             = desc("slots", "Worker slots.")
	pluginRestarts    = desc("plugin_restarts_total", "Times a plugin process was restarted after it died.", "plugin")
	configVersion     = desc("config_version", "Version of the config in force, as recorded on start events.")
	modelTurns        = desc("model_turns_total", "Agent model turns journaled, by model (model tool/alias).", "model")
	modelTokens       = desc("model_tokens_total", "Tokens of agent model turns, by model and direction (input, output).", "model", "direction")
	modelCost         = desc("model_cost_total", "Budget units agent model turns were charged, by model.", "model")
	sandboxStarted    = desc("sandbox_workers_started_total", "Script sandbox worker processes started since the daemon started.")
	sandboxKilled     = desc("sandbox_workers_killed_total", "Script sandbox workers that died or were killed for a script limit, by limit.", "limit")
	sandboxRequests   = desc("sandbox_requests_total", "Round trips to script sandbox workers (the callables of the steps that waited for a worker together are one).")
	sandboxCalls      = desc("sandbox_calls_total", "Steps' callable evaluations sent to script sandbox workers, alone or in a shared round trip.")
	sandboxRerun      = desc("sandbox_calls_rerun_total", "Evaluations sent again alone after the round trip they shared failed as a whole.")
	ownerRunning      = desc("owner_runs_running", "An owner's runs started and not ended (the top owners by use; the rest as owner=\"other\").", "owner")
	ownerQueued       = desc("owner_runs_queued", "An owner's runs accepted and not yet started, on this daemon (the top owners by use; the rest as owner=\"other\").", "owner")
	traceDropped      = desc("trace_spans_dropped_total", "Spans of run traces handed to the OTLP exporter and not sent (its queue full, or the collector refusing) since the daemon started; their runs stay in the trace outbox and are exported again.")
	ownerSpent        = desc("owner_spent_window", "Budget units an owner's runs were charged in the last hour, by every daemon of the store (the top owners by use; the rest as owner=\"other\").", "owner")
)

// MaxOwnerSeries bounds the owner label: the owners using the most get a
// series each, and the rest are summed under owner="other", so a daemon
// with 10,000 owners does not make 10,000 series per figure.
const MaxOwnerSeries = 20

// OtherOwners is the owner label of the owners past MaxOwnerSeries.
const OtherOwners = "other"

var allDescs = []*prometheus.Desc{
	toolAttempts, toolUnits, toolAmplification, toolOverDeclared, toolOverUnits, modelOverspent,
	runsAccepted, runsLive, runsFinished, leasesExpired, deadLetters, eventsDropped, refused, blocked, admissionOpen, admissionState,
	tasks, slots, pluginRestarts, configVersion, modelTurns, modelTokens, modelCost,
	sandboxStarted, sandboxKilled, sandboxRequests, sandboxCalls, sandboxRerun,
	ownerRunning, ownerQueued, ownerSpent, traceDropped,
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	st := c.src.Engine.Stats()
	for _, t := range st.Types {
		counter(toolAttempts, float64(t.Attempts), t.Type)
		counter(toolUnits, float64(t.Units), t.Type)
		gauge(toolAmplification, t.Amplification, t.Type)
		counter(toolOverDeclared, float64(t.OverDeclared), t.Type)
		counter(toolOverUnits, float64(t.OverUnits), t.Type)
	}
	counter(runsAccepted, float64(st.Counts["accepted"]))
	counter(leasesExpired, float64(st.Counts["lease_expired"]))
	counter(deadLetters, float64(st.Counts["dead_lettered"]))
	counter(eventsDropped, float64(st.Counts["events_dropped"]))
	var traceDrops int64
	if c.src.TraceDropped != nil {
		traceDrops = c.src.TraceDropped()
	}
	counter(traceDropped, float64(traceDrops))
	for _, p := range []string{"completed", "cancelled", "failed"} {
		counter(runsFinished, float64(st.Counts["finished_"+p]), p)
	}
	blockedBy := map[string]int64{}
	for _, r := range knownBlocked {
		blockedBy[r] = 0
	}
	for k, v := range st.Counts {
		if r, ok := strings.CutPrefix(k, "blocked_"); ok {
			blockedBy[r] = v
		}
	}
	for r, n := range blockedBy {
		counter(blocked, float64(n), r)
	}
	refusals := map[string]int64{}
	for _, r := range knownRefusals {
		refusals[r] = 0
	}
	for reason, n := range st.Refusals {
		refusals[reason] = n
	}
	for reason, n := range refusals {
		counter(refused, float64(n), reason)
	}
	models := map[string]engine.ModelStats{}
	if c.src.Models != nil {
		for _, m := range c.src.Models() {
			models[m] = engine.ModelStats{Model: m}
		}
	}
	for _, m := range st.Models {
		models[m.Model] = m
	}
	for _, m := range models {
		counter(modelTurns, float64(m.Turns), m.Model)
		counter(modelTokens, float64(m.InputTokens), m.Model, "input")
		counter(modelTokens, float64(m.OutputTokens), m.Model, "output")
		counter(modelCost, float64(m.Cost), m.Model)
		counter(modelOverspent, float64(m.Overspent), m.Model)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := c.src.Engine.Health(ctx)
	open := 0.0
	if h.Admission == "open" {
		open = 1
	}
	gauge(admissionOpen, open)
	for _, s := range []string{"open", engine.CodeDraining, engine.CodeStorage} {
		v := 0.0
		if h.Admission == s {
			v = 1
		}
		gauge(admissionState, v, s)
	}
	gauge(tasks, float64(h.Queued), "queued")
	gauge(tasks, float64(h.Held), "held")
	gauge(slots, float64(h.Slots))
	if phases, err := c.src.Engine.RunPhases(ctx); err == nil {
		for _, p := range engine.LivePhases {
			gauge(runsLive, float64(phases[p]), string(p))
		}
	} else {
		ch <- prometheus.NewInvalidMetric(runsLive, err)
	}
	if c.src.Owners != nil {
		c.collectOwners(ctx, gauge, ch)
	}
	if c.src.Restarts != nil {
		for name, n := range c.src.Restarts() {
			counter(pluginRestarts, float64(n), name)
		}
	}
	if c.src.ConfigVersion != nil {
		gauge(configVersion, float64(c.src.ConfigVersion()))
	}
	if c.src.Sandbox != nil {
		sb := c.src.Sandbox()
		counter(sandboxStarted, float64(sb.Started))
		counter(sandboxRequests, float64(sb.Requests))
		counter(sandboxCalls, float64(sb.Calls))
		counter(sandboxRerun, float64(sb.Rerun))
		killed := map[weirflows.Limit]int{}
		for _, l := range knownLimits {
			killed[l] = 0
		}
		for l, n := range sb.Killed {
			killed[l] = n
		}
		for l, n := range killed {
			counter(sandboxKilled, float64(n), string(l))
		}
	}
}

// collectOwners emits the owner gauges: each of the MaxOwnerSeries owners
// using the most (OwnerStats lists them by use), then the rest summed.
func (c *Collector) collectOwners(ctx context.Context, gauge func(d *prometheus.Desc, v float64, labels ...string), ch chan<- prometheus.Metric) {
	owners, err := c.src.Owners(ctx)
	if err != nil {
		for _, d := range []*prometheus.Desc{ownerRunning, ownerQueued, ownerSpent} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for _, o := range TopOwners(owners, MaxOwnerSeries) {
		gauge(ownerRunning, float64(o.Running), o.Owner)
		gauge(ownerQueued, float64(o.Queued), o.Owner)
		gauge(ownerSpent, float64(o.Spent), o.Owner)
	}
}

// TopOwners keeps the first n of owners (listed by use, most first) and
// sums the rest into one entry named OtherOwners; an owner that is itself
// named "other" is counted there too, so the label stays one series.
func TopOwners(owners []engine.OwnerStats, n int) []engine.OwnerStats {
	var out []engine.OwnerStats
	var other *engine.OwnerStats
	for i, o := range owners {
		if i < n && o.Owner != OtherOwners {
			out = append(out, o)
			continue
		}
		if other == nil {
			other = &engine.OwnerStats{Owner: OtherOwners}
		}
		other.Running += o.Running
		other.Queued += o.Queued
		other.Spent += o.Spent
	}
	if other != nil {
		out = append(out, *other)
	}
	return out
}

// NewRegistry returns a registry holding the Go runtime and process
// collectors and cs.
func NewRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return reg
}

// Handler serves reg's metrics at /metrics, and a short page at / that
// says where they are.
func Handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("weir metrics: /metrics\n"))
	})
	return mux
}
