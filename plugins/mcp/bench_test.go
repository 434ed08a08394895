package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/host"
)

// BenchmarkMCPCall compares an MCP tool call made through weir (weir's
// host, the mcp plugin over gRPC, then the server over stdio) with the
// same call made directly with the go-sdk client over stdio, to the same
// server binary. The two alternate call by call, so that a loaded machine
// slows both alike; it reports each one's median and their ratio
// (weir/direct-p50, the figure to keep at or under 1.5).
func BenchmarkMCPCall(b *testing.B) {
	server := testutil.Program(b, "demo-mcp")
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(server)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()

	cmd, _ := json.Marshal([]string{server})
	_, newHost := mcpHosts(b, `{"servers":{"demo":{"command":`+string(cmd)+`}}}`, nil)
	h := newHost()

	ctx := context.Background()
	args := map[string]any{"text": "hi"}
	req := host.CallRequest{Tool: "mcp.demo-echo", Input: json.RawMessage(`{"text":"hi"}`), IdempotencyKey: "k", Attempt: 1}
	var direct, weir []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(res, err)
		}
		t1 := time.Now()
		if _, err := h.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
		direct, weir = append(direct, t1.Sub(t0)), append(weir, time.Since(t1))
	}
	d, w := median(direct), median(weir)
	b.ReportMetric(float64(d.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(w.Microseconds()), "weir-p50-µs")
	b.ReportMetric(float64(w)/float64(d), "weir/direct-p50")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
