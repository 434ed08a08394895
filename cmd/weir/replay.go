package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/replay"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var (
			flowFiles []string
			asJSON    bool
			timeout   time.Duration
			live      liveOptions
		)
		cmd := &cobra.Command{
			Use:   "test FILE.weirrun...",
			Short: "Replay recorded runs against the flow's code and report where they diverge",
			Long: `Replay each recording (made with 'weir run export') on an embedded engine,
without a daemon: every tool call and model turn is answered from the
recording by its node, visit, attempt and call, never by a plugin or a
provider, on a fake clock; decisions on waits are made as the run's
people made them. The flow is the recorded version's sources, or, with
--flow, the files given (every file the flow needs).

A recording passes when the replay takes the same path to the same end.
Otherwise the first divergence is printed at its file:line: a node that
calls another tool or other arguments, a branch taken the other way, a
call the recording holds no answer for.

With --model NAME the replay is counterfactual: every agent's model turns
are asked again, of the model tool's plugin launched from the plugins
directory (with the plugin blocks of --config), for model alias NAME,
while tool calls are still answered from the recording; the turn-by-turn
diff of the calls each side asked for, with tokens and cost, is printed.
A call the new turns ask for that the run never made stops the replay
there: a read tool is called for real only with --live-reads, an
idempotent or at-most-once tool never.

Exit status: 0 every recording passed, 1 one diverged, 2 bad input (a file
that is no recording, one of another format version, one edited by hand,
flow files that do not register).`,
			Example: `  weir run export run_8f3a > testdata/refund.weirrun
  weir test testdata/*.weirrun --flow flows/refund.star`,
			Args: minArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return m.replayTest(cmd.Context(), args, flowFiles, asJSON, timeout, live)
			},
		}
		cmd.Flags().StringArrayVar(&flowFiles, "flow", nil, "replay these flow files instead of the recorded sources (repeat for each file)")
		cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON result per recording")
		cmd.Flags().DurationVar(&timeout, "timeout", replay.DefaultTimeout, "wall-time bound of one replay")
		cmd.Flags().StringVar(&live.model, "model", "", "ask the agents' model turns again, of the live model tool, for this model alias (a counterfactual)")
		cmd.Flags().StringVar(&live.config, "config", "", "with --model: launch plugins with this daemon config file's plugin blocks")
		cmd.Flags().BoolVar(&live.reads, "live-reads", false, "with --model: call a read tool the new turns ask for that the run never called")
		return cmd
	})
}

// runExportCmd is weir run export.
func (m *Main) runExportCmd() *cobra.Command {
	var redact []string
	cmd := &cobra.Command{
		Use:   "export RUN",
		Short: "Write a run as a recording (.weirrun) that 'weir test' replays",
		Long: `Write the run as one self-contained recording on stdout: the sources of its
flow version, its input, every step's end, every tool call's arguments and
answer, every model turn's request digest and answer, the decisions on its
waits, and the times. Plugin configs and the environment never go in.
--redact POINTER (a JSON pointer, repeatable) blanks that field wherever
the run's data holds it: the input, the output, each call's arguments and
answer, each decision's payload. At most 64 MiB (E_TOO_LARGE). The format
is docs/flows.md's "Testing flows with recordings".`,
		Example: `  weir run export run_8f3a > refund.weirrun
  weir run export run_8f3a --redact /customer/email --redact /card > refund.weirrun`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := replay.Record(cmd.Context(), m.api(), args[0], redact, time.Now())
			var re *replay.Error
			if errors.As(err, &re) {
				return &exitError{code: exitFailed, err: err}
			}
			if err != nil {
				return m.apiFailure(err)
			}
			var buf bytes.Buffer
			if err := replay.Write(&buf, rec); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			_, err = m.Stdout.Write(buf.Bytes())
			return err
		},
	}
	cmd.Flags().StringArrayVar(&redact, "redact", nil, "JSON pointer of a field to blank in the input, arguments and results (repeatable)")
	return cmd
}

// testOutcome is one recording's line of weir test --json.
type testOutcome struct {
	File string `json:"file"`
	*replay.Result
	// Error is why the recording could not be replayed (bad input).
	Error string `json:"error,omitempty"`
}

// replayTest is weir test: every recording replayed, the worst outcome's
// exit status.
func (m *Main) replayTest(ctx context.Context, paths, flowPaths []string, asJSON bool, timeout time.Duration, live liveOptions) error {
	var files []apitypes.SourceFile
	if len(flowPaths) > 0 {
		read, err := readFlowFiles(flowPaths)
		if err != nil {
			return err
		}
		files = sourceFiles(read)
	}
	opts := replay.Options{Files: files, Timeout: timeout, Model: live.model, LiveReads: live.reads}
	if live.model == "" && (live.config != "" || live.reads) {
		return usageErrorf("--config and --live-reads are for a counterfactual: give --model NAME")
	}
	if live.model != "" {
		h, err := m.liveHost(live.config)
		if err != nil {
			return err
		}
		defer h.Close()
		opts.Live = h
	}
	code, passed := exitOK, 0
	for _, path := range paths {
		out := testOutcome{File: path}
		rec, err := replay.ReadFile(path)
		if err == nil {
			out.Result, err = replay.Replay(ctx, rec, opts)
		}
		switch {
		case err != nil:
			out.Error, code = err.Error(), exitUsage
		case !out.Pass:
			code = max(code, exitFailed)
		default:
			passed++
		}
		if asJSON {
			b, _ := json.Marshal(out)
			fmt.Fprintln(m.Stdout, string(b))
			continue
		}
		printOutcome(m, out)
		if out.Result != nil {
			printTurns(m, out.Turns)
		}
	}
	if !asJSON && len(paths) > 1 {
		fmt.Fprintf(m.Stdout, "%d of %d recordings passed\n", passed, len(paths))
	}
	if code != exitOK {
		return exitCode(code)
	}
	return nil
}

func printOutcome(m *Main, out testOutcome) {
	switch {
	case out.Error != "":
		fmt.Fprintf(m.Stdout, "ERROR %s\n  %s\n", out.File, out.Error)
	case out.Pass:
		fmt.Fprintf(m.Stdout, "PASS  %s (run %s of %s: %s, %s answered from the recording)\n", out.File, out.Run, out.Flow,
			count(out.Steps, "step"), count(out.Calls, "call"))
	default:
		fmt.Fprintf(m.Stdout, "FAIL  %s (run %s of %s)\n  %s\n", out.File, out.Run, out.Flow, indent(out.Divergence.String()))
	}
}

// liveOptions are weir test's counterfactual flags.
type liveOptions struct {
	model, config string
	reads         bool
}

// liveHost is the plugin host a counterfactual asks its model turns of:
// the plugins directory's, launched with the config file's plugin blocks
// as the daemon would launch them.
func (m *Main) liveHost(configPath string) (*host.Host, error) {
	cfg := host.Config{PluginsDir: m.PluginsDir, DataDir: m.DataDir, Logger: m.newLogger("weir", "warn", config.DefaultLogFormat)}
	if configPath != "" {
		c, err := loadChecked(m, configPath)
		if err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
		cfg.PluginConfig, cfg.PluginEnv, cfg.PluginMemoryMax = c.Plugins, c.PluginEnvs(), c.PluginMemoryMaxes()
	}
	h, err := host.New(cfg)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return h, nil
}

// printTurns is a counterfactual's decision diff, turn by turn.
func printTurns(m *Main, turns []replay.TurnDiff) {
	side := func(s *replay.TurnSide) string {
		if s == nil {
			return "(no such turn)"
		}
		what := s.Text
		if len(s.Calls) > 0 {
			what = strings.Join(s.Calls, "; ")
		}
		return fmt.Sprintf("%s  (%d in, %d out, cost %d)", what, s.InputTokens, s.OutputTokens, s.Cost)
	}
	for _, t := range turns {
		verdict := "differs"
		if t.Same {
			verdict = "same"
		}
		fmt.Fprintf(m.Stdout, "  %s@%d turn %d: %s\n    recorded: %s\n    replayed: %s\n", t.Node, t.Visit, t.Turn, verdict, side(t.Recorded), side(t.Replayed))
	}
}

// indent puts a multi-line text under its first line.
func indent(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte("\n  ")))
}
