package metrics

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	weirflows "github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
)

// statsEngine serves a fixed snapshot: the collector only reads it.
type statsEngine struct{ st engine.Stats }

func (s statsEngine) Stats() engine.Stats                  { return s.st }
func (s statsEngine) Health(context.Context) engine.Health { return engine.Health{Admission: "open"} }
func (s statsEngine) RunPhases(context.Context) (map[store.Phase]int, error) {
	return map[store.Phase]int{}, nil
}

// TestModelMetrics: agents' model turns show per model as turns, tokens
// in and out, and cost.
func TestModelMetrics(t *testing.T) {
	t.Parallel()
	coll := NewCollector(Sources{Engine: statsEngine{engine.Stats{Models: []engine.ModelStats{
		{Model: "llm.chat/small", Turns: 3, InputTokens: 300, OutputTokens: 30, Cost: 14},
	}}}})
	if problems, err := testutil.CollectAndLint(coll); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %+v", err, problems)
	}
	srv := httptest.NewServer(Handler(NewRegistry(coll)))
	defer srv.Close()
	text := scrape(t, srv.URL)
	for series, want := range map[string]float64{
		`weir_model_turns_total{model="llm.chat/small"}`:                     3,
		`weir_model_tokens_total{direction="input",model="llm.chat/small"}`:  300,
		`weir_model_tokens_total{direction="output",model="llm.chat/small"}`: 30,
		`weir_model_cost_total{model="llm.chat/small"}`:                      14,
	} {
		if got := value(t, text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// TestSandboxMetrics: the script sandbox's workers started, killed by
// limit, and its evaluations.
func TestSandboxMetrics(t *testing.T) {
	t.Parallel()
	coll := NewCollector(Sources{Engine: statsEngine{}, Sandbox: func() sandbox.Stats {
		return sandbox.Stats{Started: 4, Requests: 120, Calls: 900, Rerun: 5, Killed: map[weirflows.Limit]int{weirflows.LimitMemory: 2, weirflows.LimitTime: 1}}
	}})
	if problems, err := testutil.CollectAndLint(coll); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %+v", err, problems)
	}
	srv := httptest.NewServer(Handler(NewRegistry(coll)))
	defer srv.Close()
	text := scrape(t, srv.URL)
	for series, want := range map[string]float64{
		`weir_sandbox_workers_started_total`:                4,
		`weir_sandbox_requests_total`:                       120,
		`weir_sandbox_calls_total`:                          900,
		`weir_sandbox_calls_rerun_total`:                    5,
		`weir_sandbox_workers_killed_total{limit="memory"}`: 2,
		`weir_sandbox_workers_killed_total{limit="time"}`:   1,
	} {
		if got := value(t, text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}
