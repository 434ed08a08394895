package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	weirtest "github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/storemetrics"
)

func TestMain(m *testing.M) { weirtest.Main(m, weirtest.Plugins("testkit")) }

const flows = `
flow(name = "echo", nodes = [task("e", tool = "testkit.echo", args = lambda ctx: ctx.input)])
flow(name = "sleep", nodes = [task("s", tool = "testkit.sleep", args = {"ms": 60000})])
`

// scrape fetches /metrics from the handler as Prometheus would.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// value finds one sample in the exposition text.
func value(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no sample %s in\n%s", series, text)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMetrics(t *testing.T) {
	dataDir := t.TempDir()
	plugins := filepath.Join(dataDir, "plugins")
	if _, err := host.Install(plugins, weirtest.Plugin(t, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	bst, err := badgerstore.Open(filepath.Join(dataDir, "store"), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bst.Close()
	h, err := host.New(host.Config{PluginsDir: plugins, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	st := storemetrics.New(bst)
	// One slot and one queued run at most: the third start is refused.
	eng, err := engine.Open(engine.Config{Store: st, Tools: h, Workers: 1, MaxQueued: 1, Tick: 10 * time.Millisecond, LeaseTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := eng.Register(ctx, []engine.SourceFile{{Path: "f.star", Src: flows}}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatal(err, res)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = eng.Stop(ctx)
		}
	}()

	coll := NewCollector(Sources{Engine: eng, Restarts: h.Restarts, ConfigVersion: func() int64 { return 3 },
		Owners: func(ctx context.Context) ([]engine.OwnerStats, error) { return eng.OwnerStats(ctx, "") }})
	if problems, err := testutil.CollectAndLint(coll); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %+v", err, problems)
	}
	if problems, err := testutil.CollectAndLint(eng.Histograms()); err != nil || len(problems) > 0 {
		t.Errorf("histogram lint: %v %+v", err, problems)
	}
	srv := httptest.NewServer(Handler(NewRegistry(coll, eng.Histograms(), st)))
	defer srv.Close()

	waitRun := func(id string, cond func(store.Phase) bool) {
		t.Helper()
		weirtest.Eventually(t, 30*time.Second, func() error {
			run, err := eng.Get(ctx, "alice", id)
			if err != nil {
				t.Fatal(err)
			}
			if cond(run.Phase) {
				return nil
			}
			return fmt.Errorf("run %s stayed %s", id, run.Phase)
		})
	}
	submit := func(flow string) (string, error) {
		res, err := eng.Submit(ctx, engine.StartRequest{Owner: "alice", Flow: flow, Input: json.RawMessage(`{"x":1}`)})
		if err != nil {
			return "", err
		}
		return res.RunID, nil
	}
	for i := 0; i < 2; i++ {
		id, err := submit("echo")
		if err != nil {
			t.Fatal(err)
		}
		waitRun(id, store.Phase.Terminal)
	}
	sleeping, err := submit("sleep")
	if err != nil {
		t.Fatal(err)
	}
	waitRun(sleeping, func(p store.Phase) bool { return p == store.PhaseRunning })
	queued, err := submit("echo")
	if err != nil {
		t.Fatal(err)
	}
	waitRun(queued, func(p store.Phase) bool { return p == store.PhaseQueued })
	if _, err := submit("echo"); engine.ErrorCode(err) != engine.CodeQueueFull {
		t.Fatalf("third start: %v, want E_QUEUE_FULL", err)
	}

	text := scrape(t, srv.URL)
	want := map[string]float64{
		`weir_tool_attempts_total{type="testkit.echo"}`:       2,
		`weir_tool_units_total{type="testkit.echo"}`:          2,
		`weir_tool_retry_amplification{type="testkit.echo"}`:  1,
		`weir_runs_accepted_total`:                            4,
		`weir_runs_finished_total{phase="completed"}`:         2,
		`weir_runs_finished_total{phase="failed"}`:            0,
		`weir_admission_refused_total{reason="E_QUEUE_FULL"}`: 1,
		`weir_admission_open`:                                 1,
		`weir_admission_state{state="open"}`:                  1,
		`weir_admission_state{state="E_DRAINING"}`:            0,
		`weir_tasks{state="held"}`:                            1,
		`weir_tasks{state="queued"}`:                          1,
		`weir_slots`:                                          1,
		`weir_plugin_restarts_total{plugin="testkit"}`:        0,
		`weir_config_version`:                                 3,
		`weir_runs{phase="queued"}`:                           1,
		`weir_runs{phase="running"}`:                          1,
		`weir_runs{phase="waiting"}`:                          0,
		`weir_runs{phase="completing"}`:                       0,
		`weir_owner_runs_running{owner="alice"}`:              1,
		`weir_owner_runs_queued{owner="alice"}`:               1,
		// Two tries of echo, timed; three runs started (two echoes and
		// the sleep), the fourth still queued.
		`weir_tool_exec_seconds_count{type="testkit.echo"}`:  2,
		`weir_tool_wait_seconds_count{type="testkit.echo"}`:  2,
		`weir_tool_wait_seconds_count{type="testkit.sleep"}`: 1,
		`weir_run_admission_wait_seconds_count`:              3,
	}
	for series, v := range want {
		if got := value(t, text, series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if v := value(t, text, `weir_tool_exec_seconds_sum{type="testkit.echo"}`); v <= 0 {
		t.Errorf("echo's execution time sums to %v", v)
	}
	// The last bucket holds every observation; the mean `weir stats`
	// shows is the histogram's sum over its count.
	if v := value(t, text, `weir_tool_exec_seconds_bucket{type="testkit.echo",le="+Inf"}`); v != 2 {
		t.Errorf("echo's +Inf bucket holds %v tries, want 2", v)
	}
	for _, ts := range eng.Stats().Types {
		if ts.Type != "testkit.echo" {
			continue
		}
		sum := value(t, text, `weir_tool_exec_seconds_sum{type="testkit.echo"}`)
		if want := time.Duration(sum / 2 * float64(time.Second)); ts.ExecMean != want {
			t.Errorf("stats mean %v, histogram sum/count %v", ts.ExecMean, want)
		}
	}
	if v := value(t, text, `weir_store_transaction_duration_seconds_count{op="update",result="ok"}`); v < 4 {
		t.Errorf("%v store updates observed for 4 accepted runs", v)
	}
	if v := value(t, text, `weir_store_transaction_duration_seconds_count{op="view",result="ok"}`); v < 1 {
		t.Errorf("%v store views observed", v)
	}
	value(t, text, "go_goroutines")

	// Draining shows in the admission state.
	stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_ = eng.Stop(stopCtx)
	stopped = true
	text = scrape(t, srv.URL)
	if value(t, text, "weir_admission_open") != 0 || value(t, text, `weir_admission_state{state="E_DRAINING"}`) != 1 {
		t.Errorf("after stop:\n%s", text)
	}
}

// TestTopOwnersBoundsTheOwnerLabel: past the bound, owners are summed
// under "other"; a real owner named "other" joins that one series.
func TestTopOwnersBoundsTheOwnerLabel(t *testing.T) {
	t.Parallel()
	var owners []engine.OwnerStats
	for i := 0; i < 25; i++ {
		owners = append(owners, engine.OwnerStats{Owner: fmt.Sprintf("u%02d", i), Running: 25 - i, Queued: 1, Spent: 10})
	}
	owners[3].Owner = OtherOwners
	got := TopOwners(owners, 20)
	if len(got) != 20 {
		t.Fatalf("%d series, want 19 owners and other", len(got))
	}
	last := got[len(got)-1]
	// u20..u24 (5 owners) and the owner named "other".
	if last.Owner != OtherOwners || last.Queued != 6 || last.Spent != 60 || last.Running != 5+4+3+2+1+22 {
		t.Fatalf("other = %+v", last)
	}
	for _, o := range got[:len(got)-1] {
		if o.Owner == OtherOwners {
			t.Fatal("other listed twice")
		}
	}
	if got := TopOwners(owners[:2], 20); len(got) != 2 || got[1].Owner != "u01" {
		t.Fatalf("under the bound: %+v", got)
	}
}
