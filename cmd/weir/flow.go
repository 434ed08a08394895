package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/config"
	rtdaemon "github.com/weirhq/weir/runtime/daemon"
	"github.com/weirhq/weir/runtime/host"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "flow",
			Short: "Check, register, list, draw and start new flows",
			Long:  "Commands that work on flow scripts. See docs/flows.md for the language.",
			RunE: func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return commandUsageErrorf(cmd, "unknown command %q for %q", args[0], cmd.CommandPath())
				}
				return commandUsageErrorf(cmd, "%s needs a subcommand", cmd.CommandPath())
			},
		}
		cmd.AddCommand(flowCheckCommand(m), flowRegisterCommand(m), flowLsCommand(m), flowGraphCommand(m), flowNewCommand(m))
		return cmd
	})
}

func flowCheckCommand(m *Main) *cobra.Command {
	var (
		toolsPath  string
		configPath string
		asJSON     bool
		onDaemon   bool
	)
	cmd := &cobra.Command{
		Use:   "check [--tools catalog.json | --config weir.hcl | --daemon] [--json] FILE...",
		Short: "Check flow files together, offline or against the daemon",
		Long: `Check loads the flow files together, exactly as registration would, and reports
every problem with its position, a stable code and a message.

Offline (the default), subflow calls resolve among the files given only:
give the callees' files too. Tools resolve against the catalog given with
--tools (a JSON file, see docs/flows.md), or else against the installed
plugins; the tool check is never skipped, so with no catalog every tool is
unknown. With --config FILE, the installed plugins' tools are the ones their
blocks in that daemon config give (a plugin whose tools come from its
config, such as llm's models, is launched once with its block if its
manifest for that block is not cached yet).

With --daemon, the daemon on the socket runs the check, against its
registered flows and its plugins, exactly as 'weir flow register' would,
and stores nothing.

The scripts run in a sandbox worker process under the limits of the
daemon's (memory, time, steps, nesting; the --config file's sandbox block
if given): a script that exceeds one is reported as E_SCRIPT_LIMIT.

Exit status: 0 when every flow is clean (one summary line per flow),
1 when there are diagnostics (all of them are printed), 2 on usage errors.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if onDaemon && (toolsPath != "" || configPath != "") {
				return commandUsageErrorf(cmd, "--daemon checks against the daemon's plugins: it takes neither --tools nor --config")
			}
			files, err := readFlowFiles(args)
			if err != nil {
				return err
			}
			if onDaemon {
				return m.checkOnDaemon(cmd.Context(), files, asJSON)
			}
			var tools flows.Catalog
			var daemonCfg *config.Config
			if toolsPath != "" {
				c, err := flows.LoadCatalogFile(toolsPath)
				if err != nil {
					return usageErrorf("--tools: %v", err)
				}
				tools = c
			} else {
				plugins, err := optionalConfig(m, configPath)
				if err != nil {
					return err
				}
				daemonCfg = plugins
				c, err := installedCatalog(m, plugins)
				if err != nil {
					return &exitError{code: exitFailed, err: fmt.Errorf("reading the installed plugins' catalog: %w", err)}
				}
				tools = c
			}

			pool, err := rtdaemon.NewSandbox(daemonCfg)
			if err != nil {
				return err
			}
			defer pool.Close()
			mod, ds, err := pool.Analyze(cmd.Context(), flows.AnalyzeRequest{Files: files, Tools: tools, Full: true})
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			errs := ds.Errors()
			if asJSON {
				if err := ds.WriteJSON(m.Stdout); err != nil {
					return err
				}
			} else {
				if err := ds.WriteText(m.Stdout); err != nil {
					return err
				}
				if len(errs) == 0 { // warnings alone refuse nothing
					printFlowSummary(m, mod, len(files))
				}
			}
			if len(errs) == 0 {
				return nil
			}
			if toolsPath == "" && ds.Has(flows.CodeUnknownTool) {
				// A plugin that could not be launched declares no tools:
				// say why, or its tools look merely uninstalled.
				if hc, ok := tools.(*host.Catalog); ok {
					for _, p := range hc.Plugins() {
						if p.Err != nil {
							fmt.Fprintf(m.Stderr, "weir: plugin %s declares no tools: %v\n", p.Name, p.Err)
						}
					}
				}
				fmt.Fprintf(m.Stderr, "weir: tools resolve against the plugins installed in %s; install the missing ones there, or pass --tools FILE\n", m.PluginsDir)
			}
			if ds.Has(flows.CodeUnknownFlow) {
				fmt.Fprintf(m.Stderr, "weir: offline, subflows resolve among the files given only; give the callees' files too, or pass --daemon to check against the daemon's registered flows\n")
			}
			return &exitError{code: exitFailed, err: fmt.Errorf("%s in %s", count(len(errs), "problem"), count(len(files), "file"))}
		},
	}
	cmd.Flags().StringVar(&toolsPath, "tools", "", "resolve tools in this JSON catalog instead of the installed plugins")
	cmd.Flags().StringVar(&configPath, "config", "", "resolve the installed plugins' tools as configured by this daemon config file")
	cmd.Flags().BoolVar(&onDaemon, "daemon", false, "check in the daemon, against its registered flows and plugins (stores nothing)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnostics as a JSON array")
	return cmd
}

// readFlowFiles reads the flow files named on a command line.
func readFlowFiles(paths []string) ([]flows.File, error) {
	files := make([]flows.File, 0, len(paths))
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		files = append(files, flows.File{Path: p, Src: src})
	}
	return files, nil
}

// checkOnDaemon is flow check --daemon.
func (m *Main) checkOnDaemon(ctx context.Context, files []flows.File, asJSON bool) error {
	res, err := m.api().FlowCheck(ctx, sourceFiles(files)...)
	if n, refused := m.printRefusal(err, asJSON); refused {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s in %s, checked against the daemon on %s", count(n, "problem"), count(len(files), "file"), m.SocketPath)}
	}
	if err != nil {
		return m.apiFailure(err)
	}
	if asJSON {
		return diagnosticsOf(res.Diagnostics).WriteJSON(m.Stdout) // warnings, or []
	}
	_ = diagnosticsOf(res.Diagnostics).WriteText(m.Stdout)
	for _, f := range res.Flows {
		fmt.Fprintf(m.Stdout, "ok  %s  %s, version %s (checked against the daemon's registered flows and plugins; not registered)\n", f.Name, count(f.Nodes, "node"), short(f.Hash))
	}
	return nil
}

// installedCatalog is the tool catalog of the plugins installed in
// m.PluginsDir, from their cached manifests. No plugins means an empty
// catalog: every tool is unknown, the tool check is never skipped.
// With plugins (a daemon config), each plugin's manifest is the one for
// its config section: tools that come from config (models, MCP servers)
// resolve as the daemon started with that file would resolve them.
func installedCatalog(m *Main, plugins *config.Config) (*host.Catalog, error) {
	cfg := host.Config{PluginsDir: m.PluginsDir, DataDir: m.DataDir}
	if plugins != nil {
		cfg.PluginConfig, cfg.PluginEnv, cfg.PluginMemoryMax = plugins.Plugins, plugins.PluginEnvs(), plugins.PluginMemoryMaxes()
	}
	return host.LoadCatalogFor(cfg)
}

// configuredCatalog is installedCatalog with the plugin sections of the
// daemon config file at configPath, if one is named.
func configuredCatalog(m *Main, configPath string) (*host.Catalog, error) {
	plugins, err := optionalConfig(m, configPath)
	if err != nil {
		return nil, err
	}
	return installedCatalog(m, plugins)
}

// printFlowSummary prints one line per clean flow: what it is and the
// version a registration would store.
func printFlowSummary(m *Main, mod *flows.Module, nfiles int) {
	if len(mod.Flows) == 0 {
		fmt.Fprintf(m.Stdout, "no flows declared in %s\n", count(nfiles, "file"))
		return
	}
	width := 0
	for _, f := range mod.Flows {
		width = max(width, len(f.Name))
	}
	for _, f := range mod.Flows {
		parts := []string{count(len(f.Nodes), "node")}
		if d, ok := mod.Depth(f.Name); ok {
			parts = append(parts, fmt.Sprintf("subflow depth %d of max %d", d, f.MaxDepth))
		}
		if f.Budget > 0 {
			parts = append(parts, fmt.Sprintf("budget %d", f.Budget))
		}
		parts = append(parts, "version "+f.Hash[:12])
		fmt.Fprintf(m.Stdout, "ok  %-*s  %s  (%s)\n", width, f.Name, strings.Join(parts, ", "), f.Pos)
	}
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func flowRegisterCommand(m *Main) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "register FILE...",
		Short: "Check flow files together and register them with the daemon",
		Long: `Register sends the files to the daemon, which checks them together against the
registered flows and the installed plugins (the same checks and diagnostics
as 'weir flow check') and stores a new version of every flow they declare.
With any diagnostic nothing is stored. Runs already started keep the version
they started with.

Exit status: 0 registered, 1 diagnostics or a daemon error, 2 usage.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			read, err := readFlowFiles(args)
			if err != nil {
				return err
			}
			res, err := m.api().FlowRegister(cmd.Context(), sourceFiles(read)...)
			if n, refused := m.printRefusal(err, asJSON); refused {
				return &exitError{code: exitFailed, err: fmt.Errorf("%s; nothing registered", count(n, "problem"))}
			}
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, res.Flows)
			}
			_ = diagnosticsOf(res.Diagnostics).WriteText(m.Stdout) // warnings: the flows registered
			for _, f := range res.Flows {
				fmt.Fprintf(m.Stdout, "registered %s (version %s, %s)\n", f.Name, short(f.Hash), count(f.Nodes, "node"))
			}
			for _, s := range res.Schedules {
				when := "next tick " + s.Next.Format(time.RFC3339)
				if s.Paused {
					when = "paused"
				}
				fmt.Fprintf(m.Stdout, "scheduled %s (flow %s, %s)\n", s.Name, s.Flow, when)
			}
			for _, t := range res.Triggers {
				fmt.Fprintf(m.Stdout, "trigger %s: each %s event starts %s\n", t.Name, t.Event, t.Flow)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func flowLsCommand(m *Main) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the registered flows (latest version of each)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl, err := m.api().FlowList(cmd.Context())
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, fl)
			}
			if len(fl) == 0 {
				fmt.Fprintln(m.Stdout, "no flows registered: weir flow register FILE.star")
			}
			for _, f := range fl {
				// A doc is the author's text, shown to every user: on one
				// line, every control character escaped.
				fmt.Fprintf(m.Stdout, "%-20s %s  %-10s %-12s %s\n", f.Name, short(f.Hash), count(f.Nodes, "node"), orDash(f.Owner), escape.String(flows.DocSummary(f.Doc)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// diagnosticsOf turns a refusal's diagnostics back into the checker's, so
// that they print as 'weir flow check' prints them.
// sourceFiles is what the API takes of flow files read here.
func sourceFiles(files []flows.File) []apitypes.SourceFile {
	src := make([]apitypes.SourceFile, len(files))
	for i, f := range files {
		src[i] = apitypes.SourceFile{Path: f.Path, Src: string(f.Src)}
	}
	return src
}

// printRefusal prints the diagnostics of a daemon's refusal of flow files
// (text, or JSON) and says how many there were; refused is false when err
// is not such a refusal.
func (m *Main) printRefusal(err error, asJSON bool) (n int, refused bool) {
	var de *client.DiagnosticsError
	if !errors.As(err, &de) {
		return 0, false
	}
	ds := diagnosticsOf(de.Diagnostics)
	if asJSON {
		_ = ds.WriteJSON(m.Stdout)
	} else {
		_ = ds.WriteText(m.Stdout)
	}
	return len(ds), true
}

func diagnosticsOf(in []apitypes.Diagnostic) flows.Diagnostics {
	out := make(flows.Diagnostics, len(in))
	for i, d := range in {
		out[i] = flows.Diagnostic{Pos: flows.Pos{File: d.File, Line: d.Line, Col: d.Col}, Code: flows.Code(d.Code), Message: d.Message, Chain: d.Chain, Severity: flows.Severity(d.Severity)}
	}
	return out
}
