package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/bench/internal/daemon"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const parkFlow = `
flow(name = "park", nodes = [
    wait("w", timeout = "30d", next = "t"),
    task("t", tool = "testkit.echo"),
])
`

// parkSubmitFor bounds the submissions of scenario 6 so that the scenario
// stays within its two minutes: as many runs as fit are parked, up to the
// target, and the row says how many.
const parkSubmitFor = 50 * time.Second

// parked is scenario 6: runs parked on a 30-day human wait, against a
// real daemon whose --max-queued admits them all. Figures: the daemon's
// resident memory (VmRSS) with them parked, beside its RSS before the
// first submission; and restart-to-serving: SIGTERM, start again on the
// same data, time until one approved run completes, beside the start of
// the same daemon on an empty data directory.
func parked(b *bench) ([]row, error) {
	n := b.parked
	args := []string{"--max-queued", strconv.Itoa(n + 1000)}
	data, err := b.dir("parked")
	if err != nil {
		return nil, err
	}
	cfg := daemon.Config{Weir: b.weir, Plugins: b.plugins, Data: data, Args: append([]string{"--log-level", "warn"}, args...)}
	t0 := time.Now()
	d, err := daemon.Start(cfg)
	if err != nil {
		return nil, err
	}
	emptyStart := time.Since(t0)
	defer func() { d.Kill() }()
	if err := b.register(d, "park", parkFlow); err != nil {
		return nil, err
	}
	c := d.Client()
	// One run through the wait launches the plugin and loads the flow.
	warm, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "park", Input: json.RawMessage(`{}`)})
	if err != nil {
		return nil, err
	}
	if err := approveWhenWaiting(b, c, warm.RunID); err != nil {
		return nil, err
	}
	baseRSS, err := rss(d.Pid())
	if err != nil {
		return nil, err
	}

	// Submit until n runs are accepted or the time is up.
	start := time.Now()
	ids := make([]string, n)
	var next atomic.Int64
	deadline := start.Add(parkSubmitFor)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				res, err := c.RunStart(b.ctx, apitypes.StartRequest{Flow: "park", Input: json.RawMessage(`{}`)})
				if err != nil {
					errs <- fmt.Errorf("submitting: %w", err)
					return
				}
				ids[i] = res.RunID
			}
		})
	}
	progress := make(chan struct{})
	go func() {
		for {
			select {
			case <-progress:
				return
			case <-time.After(10 * time.Second):
				fmt.Fprintf(b.log, "  %v: %d submitted\n", time.Since(start).Round(time.Second), min(int(next.Load()), n))
			}
		}
	}()
	wg.Wait()
	close(progress)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	count := min(int(next.Load()), n)
	fmt.Fprintf(b.log, "  %d runs accepted in %v\n", count, time.Since(start).Round(time.Millisecond))
	ids = ids[:count]
	submitted := time.Since(start)
	// Every accepted run reaches its wait: none queued or running, and
	// every one listed as waiting.
	for {
		q, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseQueued}))
		if err != nil {
			return nil, err
		}
		r, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseRunning}))
		if err != nil {
			return nil, err
		}
		if len(q)+len(r) == 0 {
			break
		}
		fmt.Fprintf(b.log, "  %v: %d queued, %d running\n", time.Since(start).Round(100*time.Millisecond), len(q), len(r))
		if time.Since(start) > parkSubmitFor+50*time.Second {
			return nil, fmt.Errorf("%d runs of %d accepted still queued and %d running %v after the first submission", len(q), count, len(r), time.Since(start).Round(time.Second))
		}
		if err := pause(b.ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	waiting, err := client.Collect(c.RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseWaiting}))
	if err != nil {
		return nil, err
	}
	if len(waiting) != count {
		return nil, fmt.Errorf("%d runs waiting, want the %d accepted", len(waiting), count)
	}
	parkedRSS, err := rss(d.Pid())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "  %d runs accepted in %v (%.0f/s), all parked after %v; RSS %s (before: %s)\n", count, submitted.Round(time.Millisecond),
		float64(count)/submitted.Seconds(), time.Since(start).Round(time.Millisecond), mib(parkedRSS), mib(baseRSS))

	// Restart: SIGTERM, start again on the same data, approve one parked
	// run and time until it completes.
	t1 := time.Now()
	if err := d.Stop(time.Minute); err != nil {
		return nil, err
	}
	stopped := time.Since(t1)
	t2 := time.Now()
	d, err = daemon.Start(cfg)
	if err != nil {
		return nil, err
	}
	answering := time.Since(t2)
	c = d.Client()
	if _, err := c.RunApprove(b.ctx, ids[count/2], "w", nil); err != nil {
		return nil, fmt.Errorf("approving after the restart: %w", err)
	}
	if err := waitPhase(b.ctx, c, ids[count/2], time.Minute); err != nil {
		return nil, err
	}
	served := time.Since(t2)
	afterRSS, err := rss(d.Pid())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "  SIGTERM to exit %v; start to answering %v; to the approved run completed %v; RSS after %s\n",
		stopped.Round(time.Millisecond), answering.Round(time.Millisecond), served.Round(time.Millisecond), mib(afterRSS))

	scope := thousands(float64(count)) + " runs parked"
	if count < n {
		scope += fmt.Sprintf(" (of %s: the most this machine accepted in the %v submission budget; %.0f accepted/s)", thousands(float64(n)), parkSubmitFor, float64(count)/submitted.Seconds())
	}
	return []row{
		{figure: "daemon RSS (VmRSS) that created them, " + scope + " on a 30-day human wait", value: mib(parkedRSS),
			limit: "same daemon before submitting " + mib(baseRSS), ratio: ratio(float64(parkedRSS) / float64(baseRSS)), target: verdict("< 256 MiB", parkedRSS < 256<<20)},
		{figure: "restart to serving with them: SIGTERM (exit took " + dur(stopped) + "), start, one approved run completed", value: dur(served),
			limit: "start on empty data " + dur(emptyStart), ratio: ratio(float64(served) / float64(emptyStart)), target: verdict("< 5 s", served < 5*time.Second)},
		{figure: "daemon RSS after the restart with them parked, serving", value: mib(afterRSS),
			limit: "same daemon before submitting " + mib(baseRSS), ratio: ratio(float64(afterRSS) / float64(baseRSS)), target: verdict("< 256 MiB", afterRSS < 256<<20)},
	}, nil
}

// approveWhenWaiting approves run id's wait "w" once it is open and waits
// for the run to complete.
func approveWhenWaiting(b *bench, c *client.Client, id string) error {
	if _, err := waitDecision(b.ctx, c, id, time.Minute); err != nil {
		return err
	}
	if _, err := c.RunApprove(b.ctx, id, "w", nil); err != nil {
		return err
	}
	return waitPhase(b.ctx, c, id, time.Minute)
}

// rss reads a process's resident set size from /proc.
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
