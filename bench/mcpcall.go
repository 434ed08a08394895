package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/bench/internal/limits"
	"github.com/weirhq/weir/runtime/host"
)

// mcpCall is scenario 10: an MCP tool call through weir (the host, the mcp
// plugin over gRPC, the server over stdio) against the same call made
// directly with the go-sdk client over stdio, to the same server
// (examples/cmd/demo-mcp's echo). The two alternate in rounds.
func mcpCall(b *bench) ([]row, error) {
	server := filepath.Join(b.root, "demo-mcp")
	if out, err := exec.CommandContext(b.ctx, "go", "build", "-o", server, "./examples/cmd/demo-mcp").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the demo MCP server: %v\n%s", err, out)
	}
	data, err := b.dir("mcp")
	if err != nil {
		return nil, err
	}
	cmd, _ := json.Marshal([]string{server})
	h, err := host.New(host.Config{PluginsDir: b.plugins, DataDir: data,
		PluginConfig: map[string]json.RawMessage{"mcp": json.RawMessage(`{"servers":{"demo":{"command":` + string(cmd) + `}}}`)}})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := cl.Connect(b.ctx, &mcp.CommandTransport{Command: exec.Command(server)}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	args := map[string]any{"text": payload100}
	in, _ := json.Marshal(args)
	req := host.CallRequest{Tool: "mcp.demo-echo", Input: in, IdempotencyKey: "bench"}
	sides := []limits.Side{
		{Name: "direct", Call: func(ctx context.Context) error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
			if err == nil && res.IsError {
				err = fmt.Errorf("echo answered an error")
			}
			return err
		}},
		{Name: "weir", Call: func(ctx context.Context) error { _, err := h.Call(ctx, req); return err }},
	}
	if _, err := limits.Alternate(b.ctx, 1, 200, 200, sides...); err != nil { // launch and warm up
		return nil, err
	}
	got, err := limits.Alternate(b.ctx, 1, 2000, 500, sides...)
	if err != nil {
		return nil, err
	}
	d, w := got["direct"], got["weir"]
	p := float64(w.Quantile(0.5)) / float64(d.Quantile(0.5))
	return []row{{figure: "MCP tool call through weir p50, 1 caller, 100 B", value: dur(w.Quantile(0.5)),
		limit: "go-sdk client direct " + dur(d.Quantile(0.5)), ratio: ratio(p), target: verdict("≤ 1.5x", p <= 1.5)}}, nil
}
