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
			Short: "Call tools directly, without a flow",
		}
		cmd.AddCommand(toolCallCmd(m))
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
