package metrics

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	wantSeries(t, coll, map[string]float64{
		`weir_model_turns_total{model="llm.chat/small"}`:                     3,
		`weir_model_tokens_total{direction="input",model="llm.chat/small"}`:  300,
		`weir_model_tokens_total{direction="output",model="llm.chat/small"}`: 30,
		`weir_model_cost_total{model="llm.chat/small"}`:                      14,
	})
}

// TestSandboxMetrics: the script sandbox's workers started, killed by
// limit, and its evaluations.
func TestSandboxMetrics(t *testing.T) {
	t.Parallel()
	coll := NewCollector(Sources{Engine: statsEngine{}, Sandbox: func() sandbox.Stats {
		return sandbox.Stats{Started: 4, Requests: 120, Calls: 900, Rerun: 5, Killed: map[weirflows.Limit]int{weirflows.LimitMemory: 2, weirflows.LimitTime: 1}}
	}})
	wantSeries(t, coll, map[string]float64{
		`weir_sandbox_workers_started_total`:                4,
		`weir_sandbox_requests_total`:                       120,
		`weir_sandbox_calls_total`:                          900,
		`weir_sandbox_calls_rerun_total`:                    5,
		`weir_sandbox_workers_killed_total{limit="memory"}`: 2,
		`weir_sandbox_workers_killed_total{limit="time"}`:   1,
	})
}

// TestLabelledCountersStartAtZero: before any event, every labelled
// counter has its series for the label values known up front (the
// engine's refusal and blocking reasons, the sandbox's limits, the
// configured models) at 0, so that rate() and alerts work from the first
// scrape; a counted value replaces its zero.
func TestLabelledCountersStartAtZero(t *testing.T) {
	t.Parallel()
	coll := NewCollector(Sources{
		Engine: statsEngine{engine.Stats{Refusals: map[string]int64{"E_QUEUE_FULL": 2}, Counts: map[string]int64{},
			Models: []engine.ModelStats{{Model: "llm.chat/large", Turns: 1, InputTokens: 10, OutputTokens: 2, Cost: 3}}}},
		Sandbox: func() sandbox.Stats { return sandbox.Stats{Killed: map[weirflows.Limit]int{}} },
		Models:  func() []string { return []string{"llm.chat/small", "llm.chat/large"} },
	})
	wantSeries(t, coll, map[string]float64{
		`weir_admission_refused_total{reason="E_QUEUE_FULL"}`:                2,
		`weir_admission_refused_total{reason="E_QUEUE_TIMEOUT"}`:             0,
		`weir_admission_blocked_total{reason="E_NO_SLOT"}`:                   0,
		`weir_admission_blocked_total{reason="E_BUDGET_IN_FLIGHT"}`:          0,
		`weir_admission_blocked_total{reason="E_BUDGET_EXHAUSTED"}`:          0,
		`weir_sandbox_workers_killed_total{limit="memory"}`:                  0,
		`weir_sandbox_workers_killed_total{limit="time"}`:                    0,
		`weir_sandbox_workers_killed_total{limit="depth"}`:                   0,
		`weir_sandbox_workers_killed_total{limit="size"}`:                    0,
		`weir_model_turns_total{model="llm.chat/small"}`:                     0,
		`weir_model_tokens_total{direction="input",model="llm.chat/small"}`:  0,
		`weir_model_tokens_total{direction="output",model="llm.chat/small"}`: 0,
		`weir_model_cost_total{model="llm.chat/small"}`:                      0,
		`weir_model_overspent_total{model="llm.chat/small"}`:                 0,
		`weir_model_turns_total{model="llm.chat/large"}`:                     1,
		`weir_model_cost_total{model="llm.chat/large"}`:                      3,
	})
}

// TestEveryMetricIsDocumented: the metrics table of docs/operators.md
// lists every metric the collector exports.
func TestEveryMetricIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operators.md"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for _, d := range allDescs {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		if !strings.Contains(string(doc), "`"+m[1]+"`") {
			t.Errorf("%s is not in the metrics table of docs/operators.md", m[1])
		}
	}
}

// wantSeries lints coll, scrapes it through the metrics handler and
// checks each series' value.
func wantSeries(t *testing.T, coll prometheus.Collector, want map[string]float64) {
	t.Helper()
	if problems, err := testutil.CollectAndLint(coll); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %+v", err, problems)
	}
	srv := httptest.NewServer(Handler(NewRegistry(coll)))
	defer srv.Close()
	text := scrape(t, srv.URL)
	for series, w := range want {
		if got := value(t, text, series); got != w {
			t.Errorf("%s = %v, want %v", series, got, w)
		}
	}
}
