package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/bench/internal/daemon"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/telemetry"
)

// tracingRounds is how many times each daemon of scenario 15 runs the
// step load, in turn with the others: the machine is shared, so each
// figure is the best of its rounds, taken between the others'.
const tracingRounds = 3

// tracingSteps is scenario 15: row 3's step load on a daemon exporting
// every run's trace to a loopback OTLP/HTTP receiver (in this process: it
// decodes each request and discards it, so no backend's CPU is in the
// figure), beside the same load with tracing off, and with sample = 0.01.
// The daemons take turns, tracingRounds each (each round begun by another
// daemon), and each keeps its best; a
// traced load is followed by a wait for its export to finish, so that no
// load runs beside another daemon's export.
func tracingSteps(b *bench) ([]row, error) {
	confs := []struct {
		name   string
		sample float64 // 0: tracing off
	}{{"off", 0}, {"on", 1}, {"sampled", 0.01}}
	ds := make([]*daemon.Daemon, len(confs))
	recvs := make([]*discardOTLP, len(confs))
	for i, c := range confs {
		var args []string
		if c.sample > 0 {
			recv, err := startDiscardOTLP()
			if err != nil {
				return nil, err
			}
			defer recv.close()
			recvs[i] = recv
			dir, err := b.dir("tracing-" + c.name + "-config")
			if err != nil {
				return nil, err
			}
			cfg := filepath.Join(dir, "weir.hcl")
			hcl := fmt.Sprintf("telemetry {\n  otlp_endpoint = %q\n  sample = %g\n}\n", recv.url, c.sample)
			if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
				return nil, err
			}
			args = []string{"--config", cfg}
		}
		d, err := b.startDaemon("tracing-"+c.name, args...)
		if err != nil {
			return nil, err
		}
		defer d.Kill()
		if err := b.stepsWarmUp([]*daemon.Daemon{d}); err != nil {
			return nil, err
		}
		ds[i] = d
	}
	best := make([]float64, len(confs))
	// CPU per step of the daemon and its plugins, from just before a load
	// to the end of its export: less moved by the machine's other load
	// than steps/s. The least of the rounds.
	cpu := make([]time.Duration, len(confs))
	for round := range tracingRounds {
		for k := range confs {
			// Each round starts with another daemon: no figure always
			// follows the same one.
			i := (round + k) % len(confs)
			c := confs[i]
			parts := daemonParts(ds[i : i+1])
			before, err := readCPU(parts)
			if err != nil {
				return nil, err
			}
			res, err := b.steps([]*daemon.Daemon{ds[i]}, append(parts, selfPart(), machinePart())...)
			if err != nil {
				return nil, fmt.Errorf("tracing %s: %w", c.name, err)
			}
			best[i] = max(best[i], res.rate())
			var caught time.Duration
			if recvs[i] != nil {
				// The export runs behind the runs (every 2s, after each
				// run's end): the next load starts once it has caught
				// up, so that no load is measured beside another's
				// export.
				if caught, err = b.exportCaughtUp(ds[i], recvs[i], c.sample); err != nil {
					return nil, fmt.Errorf("tracing %s: %w", c.name, err)
				}
			}
			after, err := readCPU(parts)
			if err != nil {
				return nil, err
			}
			var used time.Duration
			for j := range parts {
				used += after[j] - before[j]
			}
			perStep := used / (stepRuns * stepsPerRun)
			if cpu[i] == 0 || perStep < cpu[i] {
				cpu[i] = perStep
			}
			msg := ""
			if recvs[i] != nil {
				msg = fmt.Sprintf("; every sampled run's trace received %v after the load (%d traces, %d spans so far)",
					caught.Round(time.Millisecond), recvs[i].roots.Load(), recvs[i].spans.Load())
			}
			fmt.Fprintf(b.log, "  round %d, tracing %s: %s steps/s, daemon CPU %v a step%s\n", round+1, c.name, thousands(res.rate()), perStep, msg)
		}
	}
	off, on, sampled := best[0], best[1], best[2]
	return []row{
		{figure: fmt.Sprintf("durable steps/s, row 3's load, tracing on (every run exported to a loopback OTLP/HTTP receiver that decodes and discards), best of %d turns", tracingRounds),
			value: perSec(on), limit: "tracing off " + perSec(off), ratio: ratio(on / off), target: verdict("≥ 0.9x", on/off >= 0.9)},
		{figure: "same, sample = 0.01", value: perSec(sampled), limit: "tracing off " + perSec(off), ratio: ratio(sampled / off),
			target: verdict("≥ 0.9x", sampled/off >= 0.9)},
		{figure: fmt.Sprintf("CPU per step of weir serve and its plugins, tracing on, its export included, least of %d turns", tracingRounds),
			value: dur(cpu[1]), limit: "tracing off " + dur(cpu[0]), ratio: ratio(float64(cpu[1]) / float64(cpu[0]))},
		{figure: "same, sample = 0.01", value: dur(cpu[2]), limit: "tracing off " + dur(cpu[0]), ratio: ratio(float64(cpu[2]) / float64(cpu[0]))},
	}, nil
}

// exportCaughtUp waits until recv holds the root span of every run of d
// that the sampler keeps, and says how long that took.
func (b *bench) exportCaughtUp(d *daemon.Daemon, recv *discardOTLP, sample float64) (time.Duration, error) {
	start := time.Now()
	runs, err := client.Collect(d.Client().RunListAll(b.ctx, client.RunListParams{Phase: apitypes.PhaseCompleted}))
	if err != nil {
		return 0, err
	}
	sampler := sdktrace.TraceIDRatioBased(sample)
	var want int64
	for _, r := range runs {
		if sampler.ShouldSample(sdktrace.SamplingParameters{TraceID: telemetry.TraceID(r.ID)}).Decision == sdktrace.RecordAndSample {
			want++
		}
	}
	deadline := start.Add(2 * time.Minute)
	for recv.roots.Load() < want {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the receiver has %d of the %d sampled runs' traces after two minutes", recv.roots.Load(), want)
		}
		time.Sleep(20 * time.Millisecond) // polling the receiver's count against a deadline
	}
	return time.Since(start), nil
}

// discardOTLP is an OTLP/HTTP trace receiver that decodes each request,
// counts its spans and keeps nothing.
type discardOTLP struct {
	url          string
	srv          *http.Server
	spans, roots atomic.Int64
}

func startDiscardOTLP() (*discardOTLP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &discardOTLP{url: "http://" + ln.Addr().String()}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *discardOTLP) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	var msg coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var n, roots int64
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				n++
				if len(sp.ParentSpanId) == 0 {
					roots++
				}
			}
		}
	}
	r.spans.Add(n)
	r.roots.Add(roots)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *discardOTLP) close() { _ = r.srv.Close() }
