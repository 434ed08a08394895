// Command testkit is a weir plugin of tools that misbehave on purpose, for
// weir's own tests and benchmarks: echo, sleep (honours cancellation), hang
// (ignores it), fail (retryable failures for the first N attempts of a
// logical call), crash (exits mid-call), flood (answers N bytes),
// exclusive (at most once without a reconcile probe: records how many of
// its calls overlap), once (at most once with a probe whose answer the
// input steers), cost, bounded (declares a default timeout) and log.
//
// Its manifest depends on its config, as a plugin whose tools come from
// config (models, MCP servers) does: the tools named in the config's
// "hide" list are not declared.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/weirhq/weir/sdk"
)

// configSchema is testkit's config section: any key, "hide" a list of
// tool names.
const configSchema = `{"type":"object","properties":{"hide":{"type":"array","items":{"type":"string"}}}}`

func main() {
	sdk.ServeWith(sdk.Options{Name: "testkit", ConfigSchema: configSchema, Tools: configured})
}

// configured is the tools minus those the config hides.
func configured(raw json.RawMessage) ([]sdk.Tool, error) {
	var c struct{ Hide []string }
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("testkit config: %w", err)
		}
	}
	hide := map[string]bool{}
	for _, n := range c.Hide {
		hide[n] = true
	}
	var out []sdk.Tool
	for _, t := range tools() {
		if !hide[t.Name] {
			out = append(out, t)
		}
	}
	return out, nil
}
