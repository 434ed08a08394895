package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const (
	hostileSecret = "hostile-token-0123456789abcdef"
	victimSecret  = "victim-token-0123456789abcdef0"
)

// hostileStar and hostileLua spin in a step's args callable, hashing a
// 1 MiB string, until the sandbox's deadline stops them.
const (
	hostileStar = `
def spin(ctx):
    s = "a" * (1 << 20)
    n = 0
    for i in range(1000000):
        for j in range(1000000):
            n += hash(s)
    return {"n": n}

flow(name = "spin_star", nodes = [task("s", tool = "testkit.echo", args = spin)])
`
	hostileLua = `
local function spin(ctx)
  local s = string.rep("a", 1048576)
  local n = 0
  while true do
    n = n + #string.upper(s)
  end
  return {n = n}
end

flow{"spin_lua", nodes = {task{"s", tool = "testkit.echo", args = spin}}}
`
)

// TestAVictimRunsBesideHostileCallables: on a real daemon whose sandbox
// has two workers, one owner's eight runs spin in their callables (four
// Starlark, four Lua) until the sandbox's 10 s deadline, holding both
// workers with six more waiting; another owner's one-step run, started
// then, completes within 2 s — its first evaluation takes a spare worker
// (sandbox.spare_workers), where before it waited for a hostile
// callable's deadline (10 s).
func TestAVictimRunsBesideHostileCallables(t *testing.T) {
	e2e(t, "starts a real daemon with sandbox workers")
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := tokenConfig(t, fmt.Sprintf("sandbox {\n  workers = 2\n  timeout = \"10s\"\n}\nmetrics {\n  address = %q\n}\n", metricsAddr),
		"hostile", hostileSecret, "victim", victimSecret)
	d := newDaemon(t)
	d.serveArgs = []string{"--config", cfg}
	d.start("")
	hostile, victim := d.tokenClient(hostileSecret), d.tokenClient(victimSecret)
	ctx := context.Background()
	for _, f := range []apitypes.SourceFile{{Path: "spin.star", Src: hostileStar}, {Path: "spin.lua", Src: hostileLua}} {
		if _, err := hostile.FlowRegister(ctx, f); err != nil {
			t.Fatalf("register %s: %+v", f.Path, err)
		}
	}
	if _, err := victim.FlowRegister(ctx, apitypes.SourceFile{Path: "hello.star",
		Src: `flow(name = "hello", nodes = [task("e", tool = "testkit.echo", args = lambda ctx: {"hi": ctx.input["hi"]})])`}); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, metricsAddr)
	requests0, calls0 := sample(t, before, "weir_sandbox_requests_total"), sample(t, before, "weir_sandbox_calls_total")
	var spinning []string
	for i := range 8 {
		res, err := hostile.RunStart(ctx, apitypes.StartRequest{Flow: []string{"spin_star", "spin_lua"}[i%2], Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		spinning = append(spinning, res.RunID)
	}
	// Both workers spin and the other six callables wait for one.
	testutil.Eventually(t, time.Minute, func() error {
		m := scrape(t, metricsAddr)
		if r, c := sample(t, m, "weir_sandbox_requests_total")-requests0, sample(t, m, "weir_sandbox_calls_total")-calls0; r < 2 || c < 8 {
			return fmt.Errorf("%v round trips and %v callables sent of the hostile runs, want 2 and 8", r, c)
		}
		return nil
	})
	began := time.Now()
	res, err := victim.RunStart(ctx, apitypes.StartRequest{Flow: "hello", Input: json.RawMessage(`{"hi": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := victim.RunWait(ctx, res.RunID, client.RunWaitParams{})
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("the victim's run ended %s %+v", v.Phase, v.Error)
	}
	for _, id := range spinning {
		s, err := hostile.RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Phase.Terminal() {
			t.Fatalf("hostile run %s ended (%s) before the victim's: the case is not the one tested", id, s.Phase)
		}
	}
	if took > 2*time.Second {
		t.Fatalf("the victim's one-step run took %v beside eight hostile callables, want within 2s", took)
	}
	t.Logf("the victim's one-step run completed in %v beside eight hostile callables", took)
	// The drain's grace (5 s) ends with the spins still running: their
	// evaluations are abandoned and the daemon stops, where it waited
	// for every spin's deadline and its batch's reruns (over 30 s).
	stopping := time.Now()
	d.stop()
	t.Logf("the daemon stopped %v after SIGTERM", time.Since(stopping))
}

// TestATrickleBesideAFlood: on a real daemon with four slots, a flood
// owner queues 20x what the slots can run while a trickle owner runs one
// run after another. The trickle's latency (accepted → completed) is
// measured alone first, then beside the flood: its p99 stays within 2x of
// alone, and the flood still holds every slot the trickle leaves.
func TestATrickleBesideAFlood(t *testing.T) {
	e2e(t, "starts a real daemon")
	const slots, trickleMS, trickle = 4, 400, 20
	cfg := tokenConfig(t, "", "flood", hostileSecret, "trickle", victimSecret)
	d := newDaemon(t)
	d.serveArgs = []string{"--config", cfg, "--workers", fmt.Sprint(slots), "--max-queued", "10000"}
	d.start("")
	flood, light := d.tokenClient(hostileSecret), d.tokenClient(victimSecret)
	ctx := context.Background()
	for _, c := range []*client.Client{flood, light} {
		if _, err := c.FlowRegister(ctx, apitypes.SourceFile{Path: "nap.star",
			Src: fmt.Sprintf(`flow(name = "nap_%s", nodes = [task("z", tool = "testkit.sleep", args = lambda ctx: {"ms": ctx.input["ms"]})])`, map[*client.Client]string{flood: "flood", light: "trickle"}[c])}); err != nil {
			t.Fatal(err)
		}
	}
	latencies := func(tag string) []time.Duration {
		var ls []time.Duration
		for i := range trickle {
			res, err := light.RunStart(ctx, apitypes.StartRequest{Flow: "nap_trickle", Input: json.RawMessage(fmt.Sprintf(`{"ms": %d}`, trickleMS)), RequestID: fmt.Sprintf("%s-%d", tag, i)})
			if err != nil {
				t.Fatal(err)
			}
			v, err := light.RunWait(ctx, res.RunID, client.RunWaitParams{})
			if err != nil || v.Phase != apitypes.PhaseCompleted {
				t.Fatalf("trickle run %s: %v %+v", res.RunID, err, v)
			}
			ls = append(ls, runLatency(t, v))
		}
		slices.Sort(ls)
		return ls
	}
	alone := latencies("alone")

	// The flood's runs last 50–349 ms (200 on average, so that they end
	// at different times), 20x what the slots run in the trickle's time.
	floodRuns := 20 * slots * trickle * trickleMS / 200
	starts := make(chan int)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for i := range starts {
				if err == nil {
					_, err = flood.RunStart(ctx, apitypes.StartRequest{Flow: "nap_flood", Input: json.RawMessage(fmt.Sprintf(`{"ms": %d}`, 50+i*37%300)), RequestID: fmt.Sprint("flood-", i)})
				}
			}
			errs <- err
		}()
	}
	for i := range floodRuns {
		starts <- i
	}
	close(starts)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("a flood start: %v", err)
		}
	}
	floodRunning := func() int {
		t.Helper()
		running, err := client.Collect(flood.RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseRunning}))
		if err != nil {
			t.Fatal(err)
		}
		return len(running)
	}
	testutil.Eventually(t, time.Minute, func() error {
		if n := floodRunning(); n < slots {
			return fmt.Errorf("%d flood runs running, want every slot", n)
		}
		return nil
	})
	beside := latencies("beside")
	// With the trickle done and a backlog left, the flood takes every
	// slot again. A listing is one instant, which may fall between a
	// flood run's end and its successor's lease: the slots are read until
	// all four run the flood.
	running := 0
	testutil.Eventually(t, time.Minute, func() error {
		if running = floodRunning(); running < slots {
			return fmt.Errorf("%d of %d slots run the flood with its backlog queued and the trickle done", running, slots)
		}
		return nil
	})
	queued, err := client.Collect(flood.RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseQueued}))
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) == 0 {
		t.Fatal("the flood's backlog ran out during the trickle: the case is not the one tested")
	}
	p99 := func(ls []time.Duration) time.Duration { return ls[(len(ls)*99+99)/100-1] }
	ratio := float64(p99(beside)) / float64(p99(alone))
	t.Logf("trickle latency p99 %v alone, %v beside a flood of %d runs (%.2fx); after it the flood ran %d with %d queued", p99(alone), p99(beside), floodRuns, ratio, running, len(queued))
	if ratio > 2 {
		t.Errorf("the trickle's p99 latency beside the flood is %.2fx alone's (%v vs %v), want within 2x", ratio, p99(beside), p99(alone))
	}
	d.stop()
}

// runLatency is an ended run's time from acceptance to its end.
func runLatency(t *testing.T, v *apitypes.Run) time.Duration {
	t.Helper()
	created, err1 := time.Parse(time.RFC3339Nano, v.CreatedAt)
	ended, err2 := time.Parse(time.RFC3339Nano, v.UpdatedAt)
	if err1 != nil || err2 != nil {
		t.Fatalf("run %s times %q %q: %v %v", v.ID, v.CreatedAt, v.UpdatedAt, err1, err2)
	}
	return ended.Sub(created)
}
