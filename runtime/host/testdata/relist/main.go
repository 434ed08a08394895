// Command relist is a test plugin whose tool list changes after launch,
// as an MCP bridge's does when a server's list changes: relist.set
// {"tools": ["a", "b"]} publishes relist.set and relist.a, relist.b, each
// of which answers its own name.
package main

import (
	"context"
	"encoding/json"

	"github.com/weirhq/weir/sdk"
)

func main() {
	changes := sdk.NewToolChanges()
	named := func(name string) sdk.Tool {
		return sdk.Tool{Name: "relist." + name, Idempotent: true, Run: func(context.Context, *sdk.Call) (any, error) {
			return name, nil
		}}
	}
	var set sdk.Tool
	set = sdk.Tool{Name: "relist.set", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) {
		var in struct{ Tools []string }
		if err := json.Unmarshal(c.Input, &in); err != nil {
			return nil, err
		}
		tools := []sdk.Tool{set}
		for _, n := range in.Tools {
			tools = append(tools, named(n))
		}
		return len(tools), changes.Publish(tools...)
	}}
	sdk.ServeWith(sdk.Options{Name: "relist", Changes: changes, Tools: func(json.RawMessage) ([]sdk.Tool, error) {
		return []sdk.Tool{set}, nil
	}})
}
