package engine

import (
	"sort"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// stats keeps the four figures per task type of docs/design.md §4 (queue depth,
// wait time, execution time, retry amplification) plus engine-wide
// counters. It is display only: after a restart it starts from zero.
type stats struct {
	mu       sync.Mutex
	types    map[string]*typeStats
	refusals map[string]int64
	counts   map[string]int64
	models   map[string]*ModelStats
}

type typeStats struct {
	waitSum, execSum time.Duration
	waitMax, execMax time.Duration
	waits, execs     int64
	attempts, units  int64
	queued           int64
}

func newStats() *stats {
	return &stats{types: map[string]*typeStats{}, refusals: map[string]int64{}, counts: map[string]int64{}, models: map[string]*ModelStats{}}
}

func (s *stats) typ(name string) *typeStats {
	t := s.types[name]
	if t == nil {
		t = &typeStats{}
		s.types[name] = t
	}
	return t
}

func (s *stats) leased(typ string, wait time.Duration) {
	if wait < 0 {
		wait = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.typ(typ)
	t.waits++
	t.waitSum += wait
	t.waitMax = max(t.waitMax, wait)
}

// attempt counts one try of a logical tool call and its execution time.
func (s *stats) attempt(tool string, exec time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.typ(tool)
	t.attempts++
	t.execs++
	t.execSum += exec
	t.execMax = max(t.execMax, exec)
}

// unit counts one logical tool call reaching its end (any outcome).
func (s *stats) unit(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.typ(tool).units++
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

// TypeStats are the four figures for one task type (a tool name, or the
// node kind for steps that call no tool).
type TypeStats struct {
	Type       string        `json:"type"`
	QueueDepth int64         `json:"queue_depth"`
	WaitMean   time.Duration `json:"wait_mean_ns"`
	WaitMax    time.Duration `json:"wait_max_ns"`
	ExecMean   time.Duration `json:"exec_mean_ns"`
	ExecMax    time.Duration `json:"exec_max_ns"`
	Attempts   int64         `json:"attempts"`
	Units      int64         `json:"units"`
	// Amplification is attempts ÷ distinct work units (1 means no retry).
	Amplification float64 `json:"amplification"`
}

// ModelStats are the journaled model turns of agents per model: the
// model tool and the alias asked ("llm.chat/small").
type ModelStats struct {
	Model        string `json:"model"`
	Turns        int64  `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         int64  `json:"cost"`
}

// turn counts one journaled model turn.
func (s *stats) turn(model string, in, out, cost int64) {
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
		ts := TypeStats{Type: name, QueueDepth: t.queued, WaitMax: t.waitMax, ExecMax: t.execMax, Attempts: t.attempts, Units: t.units}
		if t.waits > 0 {
			ts.WaitMean = t.waitSum / time.Duration(t.waits)
		}
		if t.execs > 0 {
			ts.ExecMean = t.execSum / time.Duration(t.execs)
		}
		if t.units > 0 {
			ts.Amplification = float64(t.attempts) / float64(t.units)
		}
		out.Types = append(out.Types, ts)
	}
	sort.Slice(out.Types, func(i, j int) bool { return out.Types[i].Type < out.Types[j].Type })
	for _, m := range s.models {
		out.Models = append(out.Models, *m)
	}
	sort.Slice(out.Models, func(i, j int) bool { return out.Models[i].Model < out.Models[j].Model })
	return out
}
