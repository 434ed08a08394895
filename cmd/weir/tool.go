package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/sdk/wire"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "tool",
			Short: "Call and describe tools directly, without a flow",
		}
		cmd.AddCommand(toolCallCmd(m), toolDescribeCmd(m))
		return cmd
	})
}

func toolCallCmd(m *Main) *cobra.Command {
	var (
		input, key, config, logLevel string
		timeout                      time.Duration
		progress                     bool
	)
	cmd := &cobra.Command{
		Use:   "call TOOL",
		Short: "Call a tool once and print its output as JSON",
		Long: `call launches the tool's plugin from the plugins directory, exactly as the
daemon would (checksum, schema, deadline), makes one call and prints the
output. It is a vendor's test loop: build, weir plugin install, weir tool call.

A failed call prints its kind (retryable, permanent, schema, crashed,
deadline, ...) and exits 1. Without --idempotency-key each invocation is a
new logical call with a fresh key; pass the same key to play a retry.`,
		Example: `  weir tool call testkit.echo --input '{"hello":"world"}'
  weir tool call notes.put --input @note.json --idempotency-key note-1
  echo '{"path":"a.txt"}' | weir tool call fs.read --input - --plugin-config '{"root":"/tmp"}'`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tool := args[0]
			pluginName, _, err := wire.SplitToolName(tool)
			if err != nil {
				return usageErrorf("%v", err)
			}
			in, err := toolCallInput(input, m.Stdin)
			if err != nil {
				return err
			}
			cfg := host.Config{
				PluginsDir: m.PluginsDir,
				DataDir:    m.DataDir,
				Logger:     hclog.New(&hclog.LoggerOptions{Name: "weir", Level: hclog.LevelFromString(logLevel), Output: m.Stderr}),
			}
			if config != "" {
				if !json.Valid([]byte(config)) {
					return usageErrorf("--plugin-config is not JSON")
				}
				cfg.PluginConfig = map[string]json.RawMessage{pluginName: json.RawMessage(config)}
			}
			if key == "" {
				key = "cli-" + randomHex(8)
			}
			h, err := host.New(cfg)
			if err != nil {
				return err
			}
			defer h.Close()
			req := host.CallRequest{Tool: tool, Input: in, Attempt: 1, IdempotencyKey: key}
			if timeout > 0 {
				req.Deadline = time.Now().Add(timeout)
			}
			if progress {
				req.Progress = func(done, total int64) {
					if total > 0 {
						fmt.Fprintf(m.Stderr, "progress %d/%d\n", done, total)
					} else {
						fmt.Fprintf(m.Stderr, "progress %d\n", done)
					}
				}
			}
			res, err := h.Call(cmd.Context(), req)
			if err != nil {
				var te *host.ToolError
				if errors.As(err, &te) && te.Kind == host.KindUnknownTool {
					// As registration does for a tool a task names.
					if s := flows.Suggest(tool, h.Names()); s != "" {
						te.Message += fmt.Sprintf(" (did you mean %q?)", s)
					}
				}
				return &exitError{code: exitFailed, err: err}
			}
			var out bytes.Buffer
			if err := json.Indent(&out, res.Output, "", "  "); err != nil {
				out.Reset()
				out.Write(res.Output)
			}
			out.WriteByte('\n')
			_, err = m.Stdout.Write(out.Bytes())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "{}", "the input: JSON, @FILE, or - for stdin")
	f.StringVar(&key, "idempotency-key", "", "idempotency key of the logical call (default: a fresh one)")
	f.StringVar(&config, "plugin-config", "", "the plugin's configuration section, JSON")
	f.DurationVar(&timeout, "timeout", 0, "deadline of the call (default 60s)")
	f.BoolVar(&progress, "progress", false, "print the tool's progress reports on stderr")
	f.StringVar(&logLevel, "log-level", "warn", "level of the host's and the plugin's log lines on stderr")
	return cmd
}

// toolCallInput reads --input: inline JSON, @FILE or - (stdin). It is not
// checked here: the host refuses input that is not JSON or does not match
// the tool's schema, with the same error a flow would get.
func toolCallInput(s string, stdin io.Reader) (json.RawMessage, error) {
	switch {
	case s == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, err
		}
		return b, nil
	case len(s) > 0 && s[0] == '@':
		b, err := os.ReadFile(s[1:])
		if err != nil {
			return nil, usageErrorf("--input: %v", err)
		}
		return b, nil
	}
	return json.RawMessage(s), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// toolDescription is what `weir tool describe` prints: what a tool
// declares, as the host reads its plugin's manifest.
type toolDescription struct {
	Name            string `json:"name"`
	Plugin          string `json:"plugin"`
	SHA256          string `json:"sha256"`
	ProtocolVersion int    `json:"protocol_version"`
	// Class is the effect class: read, idempotent or at_most_once.
	Class flows.Effect `json:"class"`
	// Reconcile says the tool has a reconcile probe.
	Reconcile   bool   `json:"reconcile"`
	Description string `json:"description,omitempty"`
	// Cost is the declared budget units per call.
	Cost int64 `json:"cost"`
	// TimeoutMS is the tool's default timeout in milliseconds; 0: none
	// declared (a node's timeout, else the engine's default, applies).
	TimeoutMS    int64                `json:"timeout_ms"`
	Contract     string               `json:"contract,omitempty"`
	Models       []host.ModelManifest `json:"models,omitempty"`
	InputSchema  json.RawMessage      `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage      `json:"output_schema,omitempty"`
}

func toolDescribeCmd(m *Main) *cobra.Command {
	var (
		asJSON     bool
		configPath string
	)
	cmd := &cobra.Command{
		Use:   "describe TOOL",
		Short: "Show what a tool declares: effect class, probe, cost, timeout and schemas",
		Long: `describe prints what an installed tool declares, as the daemon reads it from
its plugin's manifest: its effect class (read: no side effect, repeated
freely; idempotent: dedupes on weir's key, retried; at_most_once: never made
again blindly), whether it has a reconcile probe (asked when a call's
outcome is lost), its declared cost, its default timeout and its input and
output schemas. A tool that comes from a plugin's config (llm's models,
mcp's servers) needs --config FILE, as weir plugin ls does.`,
		Example: `  weir tool describe mail.send
  weir tool describe fs.read --json
  weir tool describe mcp.files-read_file --config weir.hcl`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if _, _, err := wire.SplitToolName(name); err != nil {
				return usageErrorf("%v", err)
			}
			cat, err := configuredCatalog(m, configPath)
			if err != nil {
				return err
			}
			d, ok := describeTool(cat, name)
			if !ok {
				msg := fmt.Sprintf("%s: %s: no installed plugin provides this tool", host.KindUnknownTool, name)
				if s := flows.Suggest(name, cat.Names()); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return &exitError{code: exitFailed, err: fmt.Errorf("%s", msg)}
			}
			if asJSON {
				return printJSON(m.Stdout, d)
			}
			printToolDescription(m.Stdout, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the description as JSON, with full schemas")
	cmd.Flags().StringVar(&configPath, "config", "", "describe the tool as configured by this daemon config file")
	return cmd
}

// describeTool finds name in the catalog, with the plugin declaring it.
func describeTool(cat *host.Catalog, name string) (toolDescription, bool) {
	for _, p := range cat.Plugins() {
		if p.Manifest == nil {
			continue
		}
		t, ok := p.Manifest.Tool(name)
		if !ok {
			continue
		}
		return toolDescription{
			Name: t.Name, Plugin: p.Name, SHA256: p.SHA256, ProtocolVersion: p.Manifest.ProtocolVersion,
			Class: t.Class(), Reconcile: t.Reconcile, Description: t.Description, Cost: t.Cost,
			TimeoutMS: t.Timeout.Milliseconds(), Contract: t.Contract, Models: t.Models,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
		}, true
	}
	return toolDescription{}, false
}

// classMeaning says in a few words what each effect class lets weir do.
var classMeaning = map[flows.Effect]string{
	flows.EffectRead:       "no side effect: repeated freely, by retries, forks and replays",
	flows.EffectIdempotent: "dedupes on weir's idempotency key: retried with the same key",
	flows.EffectAtMostOnce: "made at most once per logical call, never again blindly",
}

func printToolDescription(w io.Writer, d toolDescription) {
	fmt.Fprintln(w, d.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	if d.Description != "" {
		row("description", d.Description)
	}
	row("plugin", fmt.Sprintf("%s (%s, protocol %d)", d.Plugin, shortSum(d.SHA256), d.ProtocolVersion))
	row("class", fmt.Sprintf("%s (%s)", d.Class, classMeaning[d.Class]))
	probe := "none"
	if d.Reconcile {
		probe = "yes: asked whether a call happened when its outcome is lost"
	}
	row("probe", probe)
	row("cost", fmt.Sprintf("%d per call", d.Cost))
	timeout := "none declared (the node's timeout, else the engine's default)"
	if d.TimeoutMS > 0 {
		timeout = (time.Duration(d.TimeoutMS) * time.Millisecond).String()
	}
	row("timeout", timeout)
	if d.Contract != "" {
		row("contract", d.Contract)
	}
	if len(d.Models) > 0 {
		var ms []string
		for _, m := range d.Models {
			ms = append(ms, m.Alias)
		}
		row("models", strings.Join(ms, ", "))
	}
	schema := func(b json.RawMessage) string {
		if len(b) == 0 {
			return "undeclared (any JSON value)"
		}
		return compactJSON(b)
	}
	row("input", schema(d.InputSchema))
	if len(d.OutputSchema) > 0 {
		row("output", compactJSON(d.OutputSchema))
	}
	tw.Flush()
}
