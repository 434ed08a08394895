package main

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/bench/internal/limits"
	"github.com/weirhq/weir/runtime/host"
)

// toolCall is scenario 2: testkit.echo with a 100-byte input through weir's
// plugin host, configured as `weir serve` configures it, against the raw
// go-plugin gRPC echo of the same payload. The two alternate in rounds so
// that both see the same moments of a noisy machine.
func toolCall(b *bench) ([]row, error) {
	data, err := b.dir("host")
	if err != nil {
		return nil, err
	}
	h, err := host.New(host.Config{PluginsDir: b.plugins, DataDir: data})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	e, err := b.rawEcho()
	if err != nil {
		return nil, err
	}
	req := host.CallRequest{Tool: "testkit.echo", Input: json.RawMessage(payload100), IdempotencyKey: "bench"}
	msg := wrapperspb.Bytes([]byte(payload100))
	sides := []limits.Side{
		{Name: "raw", Call: func(ctx context.Context) error { return e.Echo(ctx, msg) }},
		{Name: "host", Call: func(ctx context.Context) error { _, err := h.Call(ctx, req); return err }},
	}
	var rows []row
	for _, c := range []struct{ callers, n, round int }{{1, 4000, 1000}, {echoFanCallers, 16000, 4000}} {
		if _, err := limits.Alternate(b.ctx, c.callers, 500, 500, sides...); err != nil { // launch and warm up
			return rows, err
		}
		got, err := limits.Alternate(b.ctx, c.callers, c.n, c.round, sides...)
		if err != nil {
			return rows, err
		}
		raw, hc := got["raw"], got["host"]
		who := plural(c.callers, "caller")
		if c.callers == 1 {
			p := float64(hc.Quantile(0.5)) / float64(raw.Quantile(0.5))
			rows = append(rows, row{figure: "testkit.echo via host p50, " + who + ", 100 B", value: dur(hc.Quantile(0.5)),
				limit: "raw gRPC " + dur(raw.Quantile(0.5)), ratio: ratio(p), target: verdict("≤ 1.5x", p <= 1.5)})
		}
		r := raw.PerSec() / hc.PerSec()
		figure := "testkit.echo via host, " + who
		if c.callers > 1 {
			figure += " (the host's default of 8 calls in flight per plugin)"
		}
		rows = append(rows, row{figure: figure, value: perSec(hc.PerSec()),
			limit: "raw gRPC " + perSec(raw.PerSec()), ratio: fmt.Sprintf("%s slower", ratio(r)), target: verdict("≤ 1.5x", r <= 1.5)})
	}
	return rows, nil
}
