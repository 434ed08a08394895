package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// The shared daemon of scenario 12: the slots and run length of scenario
// 8, two token users, and a queue long enough to hold the heavy owner's
// whole offer (the per-owner queue quota is another figure's).
const (
	fairWorkers   = overloadWorkers
	fairSleep     = overloadSleep
	fairWindow    = 4 * time.Second
	fairLightRate = 20.0 // runs/s: a quarter of what the slots can run
	fairMaxQueued = 10000
)

// fairShare is scenario 12: a light owner's p99 admission wait while a
// heavy owner offers ten times what the slots can run, beside the same
// light load on the daemon alone, in one run. Both owners are token users
// on the daemon's TCP listener; weights are the default (1 each).
func fairShare(b *bench) ([]row, error) {
	data, err := b.dir("fairshare")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	secrets := map[string]string{"heavy": "heavy-secret-0123456789", "light": "light-secret-0123456789"}
	conf := filepath.Join(data, "weir.hcl")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `tcp {
  address = %q
  token "heavy" {
    secret = %q
  }
  token "light" {
    secret = %q
  }
}
`, addr, secrets["heavy"], secrets["light"]), 0o600); err != nil {
		return nil, err
	}
	d, err := b.startDaemon("fairshare-daemon", "--config", conf, "--workers", fmt.Sprint(fairWorkers), "--max-queued", fmt.Sprint(fairMaxQueued))
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	tcp := func(owner string) (*client.Client, error) {
		return client.New("http://"+addr, client.WithToken(secrets[owner]), client.WithMaxIdleConns(64))
	}
	heavy, err := tcp("heavy")
	if err != nil {
		return nil, err
	}
	light, err := tcp("light")
	if err != nil {
		return nil, err
	}
	// Only a flow name's owner registers its versions: each owner has
	// its own copy of the flow.
	for owner, c := range map[string]*client.Client{"heavy": heavy, "light": light} {
		src := strings.Replace(overloadFlow, `name = "work"`, `name = "work-`+owner+`"`, 1)
		if _, err := c.FlowRegister(b.ctx, apitypes.SourceFile{Path: "work-" + owner + ".star", Src: src}); err != nil {
			return nil, err
		}
	}
	input := json.RawMessage(fmt.Sprintf(`{"ms":%d}`, fairSleep.Milliseconds()))
	if err := runToEnd(b.ctx, light, "work-light", input); err != nil { // launch the plugin
		return nil, err
	}
	capacity := float64(fairWorkers) / fairSleep.Seconds()

	alone, aloneLatency, err := lightWaits(b.ctx, light, input, nil)
	if err != nil {
		return nil, err
	}
	if err := waitIdle(b.ctx, d.Client(), time.Minute); err != nil {
		return nil, err
	}
	var flood offered
	shared, sharedLatency, err := lightWaits(b.ctx, light, input, func() { flood = offer(b.ctx, heavy, "work-heavy", input, 10*capacity, fairWindow) })
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "  heavy offered %d in %v, accepted %d, refused %v; light's median wait alone %v, beside it %v\n",
		flood.offered, flood.elapsed.Round(time.Millisecond), len(flood.accepted), flood.refused, alone[len(alone)/2], shared[len(shared)/2])
	// The heavy owner's backlog when the light one's last run came: what
	// global FIFO would have made that run wait.
	backlog := time.Duration(float64(len(flood.accepted)) / capacity * float64(time.Second))
	// The heavy backlog is not drained: the daemon is killed with it,
	// which keeps the scenario to seconds.
	costs, err := dispatchCost(b.ctx)
	if err != nil {
		return nil, err
	}
	p99 := func(ws []time.Duration) time.Duration { return ws[int(0.99*float64(len(ws)-1))] }
	pa, ps := p99(alone), p99(shared)
	r := float64(ps) / float64(max(pa, time.Millisecond))
	la, ls := p99(aloneLatency), p99(sharedLatency)
	rl := float64(ls) / float64(la)
	return []row{
		{figure: fmt.Sprintf("light owner's p99 admission wait alone (%.0f runs/s of %v, --workers %d)", fairLightRate, fairSleep, fairWorkers), value: dur(pa)},
		{figure: fmt.Sprintf("… beside a heavy owner offering 10x the slots (%s accepted)", thousands(float64(len(flood.accepted)))),
			value: dur(ps), limit: "alone " + dur(pa), ratio: ratio(r), target: verdict("≤ 2x", r <= 2)},
		{figure: "light owner's p99 run latency (accepted → completed) alone", value: dur(la)},
		{figure: "… beside the heavy owner's 10x", value: dur(ls), limit: "alone " + dur(la), ratio: ratio(rl), target: verdict("≤ 2x", rl <= 2)},
		{figure: "… what global FIFO would make it wait (the heavy backlog's drain)", value: dur(backlog), limit: "fair " + dur(ps), ratio: ratio(float64(backlog) / float64(max(ps, time.Millisecond)))},
		{figure: "dispatch cost per task, fair order (BenchmarkDispatch: memstore, 2 owners × 2,000 tasks, 16 slots)",
			value: fmt.Sprintf("%.1f µs", costs["fair"]/1e3), limit: fmt.Sprintf("FIFO %.1f µs", costs["fifo"]/1e3),
			ratio: ratio(costs["fair"] / costs["fifo"]), target: verdict("≤ 1.1x", costs["fair"] <= 1.1*costs["fifo"])},
	}, nil
}

// dispatchCost runs the dispatcher's BenchmarkDispatch (an internal
// package: only its own tests reach it) and returns ns per dispatched
// task by order, "fair" and "fifo".
func dispatchCost(ctx context.Context) (map[string]float64, error) {
	out, err := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkDispatch$", "-benchtime", "1000x", "-count", "1",
		"./runtime/engine/internal/dispatcher/").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("BenchmarkDispatch: %w\n%s", err, out)
	}
	costs := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "BenchmarkDispatch") {
			continue
		}
		for i := 1; i < len(f); i++ {
			order, ok := strings.CutSuffix(f[i], "-ns/task")
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(f[i-1], 64)
			if err != nil {
				return nil, fmt.Errorf("BenchmarkDispatch line %q: %w", line, err)
			}
			costs[order] = v
		}
	}
	if costs["fair"] == 0 || costs["fifo"] == 0 {
		return nil, fmt.Errorf("BenchmarkDispatch printed no figure for both orders:\n%s", out)
	}
	return costs, nil
}

// lightWaits offers the light owner's load for fairWindow (with during
// run beside it) and returns its runs' admission waits (queued → leased)
// and latencies (accepted → completed), each sorted.
func lightWaits(ctx context.Context, c *client.Client, input json.RawMessage, during func()) (waits, latencies []time.Duration, err error) {
	done := make(chan struct{})
	if during != nil {
		go func() { defer close(done); during() }()
	} else {
		close(done)
	}
	o := offer(ctx, c, "work-light", input, fairLightRate, fairWindow)
	<-done
	if len(o.accepted) == 0 {
		return nil, nil, fmt.Errorf("the light owner's runs were all refused: %v", o.refused)
	}
	for _, id := range o.accepted {
		if err := waitPhase(ctx, c, id, 5*time.Minute); err != nil {
			return nil, nil, err
		}
		w, err := admissionWait(ctx, c, id)
		if err != nil {
			return nil, nil, err
		}
		if w >= 0 {
			waits = append(waits, w)
		}
		l, err := runLatency(ctx, c, id)
		if err != nil {
			return nil, nil, err
		}
		latencies = append(latencies, l)
	}
	if len(waits) == 0 {
		return nil, nil, fmt.Errorf("none of the light owner's %d runs was leased", len(o.accepted))
	}
	slices.Sort(waits)
	slices.Sort(latencies)
	return waits, latencies, nil
}

// runLatency is an ended run's time from its accepted event to its end.
func runLatency(ctx context.Context, c *client.Client, id string) (time.Duration, error) {
	l, err := eventGap(ctx, c, id, "accepted", "completed")
	if err == nil && l < 0 {
		err = fmt.Errorf("run %s has no accepted and completed events", id)
	}
	return l, err
}
