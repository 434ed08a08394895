package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// scrape reads the daemon's /metrics at addr.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// sample reads one series from a Prometheus exposition; absent is zero
// (a labelled histogram has no series before its first observation).
func sample(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMetricsHistogramsMove scrapes /metrics from a real daemon before
// and after a parent whose child parks on a person: the latency
// histograms (tool wait and execution, admission wait, resume after a
// child and after a decision, store commits) gain exactly the
// observations the runs made, and the live phase gauge shows the two
// runs waiting, then none.
func TestMetricsHistogramsMove(t *testing.T) {
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := filepath.Join(t.TempDir(), "weir.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("metrics {\n  address = %q\n}\n", metricsAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.serveArgs = []string{"--config", cfg}
	d.start("")
	d.register(`
flow(name = "kid", nodes = [
    wait("ok", timeout = "30d", next = "k"),
    task("k", tool = "testkit.echo", args = lambda ctx: {"kid": True}),
])
flow(name = "mum", nodes = [
    subflow("call", flow = "kid", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"from_child": ctx.results["call"]}),
])
`)
	before := scrape(t, metricsAddr)
	const (
		echoExec    = `weir_tool_exec_seconds_count{type="testkit.echo"}`
		subflowWait = `weir_tool_wait_seconds_count{type="subflow"}`
		waitWait    = `weir_tool_wait_seconds_count{type="wait"}`
		admission   = `weir_run_admission_wait_seconds_count`
		childWake   = `weir_resume_latency_seconds_count{wait="child"}`
		humanWake   = `weir_resume_latency_seconds_count{wait="human"}`
		commits     = `weir_store_transaction_duration_seconds_count{op="update",result="ok"}`
		waiting     = `weir_runs{phase="waiting"}`
	)
	for _, s := range []string{echoExec, subflowWait, waitWait, admission, childWake, humanWake} {
		if v := sample(t, before, s); v != 0 {
			t.Fatalf("%s = %v before any run", s, v)
		}
	}

	ctx := context.Background()
	res, err := d.startRun("mum", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var ws []apitypes.HumanWait
	testutil.Eventually(t, 30*time.Second, func() error {
		if ws, err = d.api.RunWaits(ctx, res.RunID); err != nil || len(ws) != 1 {
			return fmt.Errorf("waits %+v %v", ws, err)
		}
		return nil
	})
	parked := scrape(t, metricsAddr)
	if v := sample(t, parked, waiting); v != 2 {
		t.Errorf("%s = %v while parent and child wait, want 2", waiting, v)
	}
	if v := sample(t, parked, admission); v != 1 {
		t.Errorf("%s = %v after the parent started, want 1 (a subflow child is not admitted from the queue)", admission, v)
	}
	if _, err := d.api.RunApprove(ctx, ws[0].RunID, ws[0].Node, nil); err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(res.RunID); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("parent ended %s: %+v", v.Phase, v.Error)
	}

	after := scrape(t, metricsAddr)
	for s, want := range map[string]float64{
		echoExec:  2, // the child's k and the parent's done
		humanWake: 1, // the child resumed after the approval
		childWake: 1, // the parent resumed after the child's end
		admission: 1,
		waiting:   0,
	} {
		if v := sample(t, after, s); v != want {
			t.Errorf("%s = %v after the runs, want %v", s, v, want)
		}
	}
	// Tasks are typed by the node they are dispatched at: the parent
	// twice at its subflow node (its start, its resume), the child once at
	// its wait (the resume; it began inside the parent's step).
	for s, want := range map[string]float64{subflowWait: 2, waitWait: 1} {
		if v := sample(t, after, s); v != want {
			t.Errorf("%s = %v after the runs, want %v", s, v, want)
		}
	}
	if b, a := sample(t, before, commits), sample(t, after, commits); a <= b {
		t.Errorf("store commits did not move: %v then %v", b, a)
	}
	if v := sample(t, after, `weir_tool_exec_seconds_bucket{type="testkit.echo",le="300"}`); v != 2 {
		t.Errorf("echo's 300 s bucket holds %v tries, want 2", v)
	}
	d.stop()
}
