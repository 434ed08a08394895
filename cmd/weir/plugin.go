package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/host"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "plugin",
			Short: "Install, list, remove and scaffold tool plugins",
			Long: `Tool plugins are binaries in the plugins directory (--plugins), each pinned by
the SHA-256 recorded when it was installed: weir refuses to launch a binary
that no longer matches its pin.`,
		}
		cmd.AddCommand(pluginInstallCmd(m), pluginLsCmd(m), pluginRmCmd(m), pluginRescanCmd(m), pluginNewCmd(m))
		return cmd
	})
}

func pluginInstallCmd(m *Main) *cobra.Command {
	return &cobra.Command{
		Use:   "install PATH...",
		Short: "Copy plugin binaries into the plugins directory and pin their SHA-256",
		Long: `install launches each binary once to read its manifest, copies it to
PLUGINS/NAME (NAME is the part of its tool names before the dot), pins its
SHA-256 in PLUGINS/pins.json and caches its manifest. Installing a binary
that is already in place only pins it; installing a new build of a plugin
replaces the old one.

When a daemon answers on the socket, install then asks it to rescan its
plugins directory (the daemon's own OS user only): the new tools are known
to it at once, so 'weir flow register' works right after, and a new build
serves the next calls while calls in flight finish on the old process.
With several daemons, each host installs into its own directory.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logger := hclog.New(&hclog.LoggerOptions{Name: "weir", Level: hclog.Warn, Output: m.Stderr})
			failed := false
			for _, path := range args {
				man, err := host.Install(m.PluginsDir, path, logger)
				if err != nil {
					fmt.Fprintf(m.Stderr, "weir: %v\n", err)
					failed = true
					continue
				}
				fmt.Fprintf(m.Stdout, "installed %s (%s) from %s: %s\n",
					man.Name, shortSum(man.SHA256), path, countTools(len(man.Tools)))
			}
			if ok := m.tellDaemon(cmd.Context()); !ok || failed {
				return exitCode(exitFailed)
			}
			return nil
		},
	}
}

func pluginRmCmd(m *Main) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME...",
		Short: "Uninstall plugins: their pins, binaries and cached manifests",
		Long: `rm removes each named plugin from the plugins directory: its pin, its binary
and its cached manifests. When a daemon answers on the socket it is asked to
rescan, as after install: the plugin's tools become unknown to new calls and
registrations, and calls in flight finish first.`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			for _, name := range args {
				if err := host.Remove(m.PluginsDir, name); err != nil {
					fmt.Fprintf(m.Stderr, "weir: %v\n", err)
					failed = true
					continue
				}
				fmt.Fprintf(m.Stdout, "removed %s from %s\n", name, m.PluginsDir)
			}
			if ok := m.tellDaemon(cmd.Context()); !ok || failed {
				return exitCode(exitFailed)
			}
			return nil
		},
	}
}

func pluginRescanCmd(m *Main) *cobra.Command {
	return &cobra.Command{
		Use:   "rescan",
		Short: "Ask the daemon to put what is installed in its plugins directory in service",
		Long: `rescan asks the daemon on the socket to re-read its plugins directory, as
install and rm do: for plugins copied there by other means, or installed by
another user. Only the daemon's own OS user may.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := m.api().AdminRescanPlugins(cmd.Context())
			if err != nil {
				return m.apiFailure(err)
			}
			printRescan(m, res)
			return nil
		},
	}
}

// tellDaemon asks the daemon on the socket, if one answers, to rescan its
// plugins directory after an install or a removal, and says what it did.
// It reports false only when the daemon serves this directory and failed
// to take the change; a daemon of another directory or another user is
// told about on stderr (the install itself stands).
func (m *Main) tellDaemon(ctx context.Context) bool {
	res, err := m.api().AdminRescanPlugins(ctx)
	var ae *client.Error
	switch {
	case errors.Is(err, client.ErrNoDaemon) && m.flagSocket == "" && m.Env("WEIR_SOCKET") == "" && m.PluginsDir != filepath.Join(m.DataDir, "plugins"):
		// A plugins directory of its own (make build's bin/plugins) and
		// the default socket: a daemon there would not serve this
		// directory, so naming its path only puzzles.
		fmt.Fprintf(m.Stdout, "a daemon started with --plugins %s will serve it\n", m.PluginsDir)
		return true
	case errors.Is(err, client.ErrNoDaemon):
		fmt.Fprintf(m.Stdout, "no daemon answers on %s; a daemon started with --plugins %s will serve it\n", m.SocketPath, m.PluginsDir)
		return true
	case errors.As(err, &ae) && ae.Code == apitypes.CodeForbidden:
		fmt.Fprintf(m.Stderr, "weir: note: the daemon on %s runs as another user and was not told; its user can run 'weir plugin rescan'\n", m.SocketPath)
		return true
	case err != nil:
		fmt.Fprintf(m.Stderr, "weir: the daemon on %s did not rescan its plugins: %v\n", m.SocketPath, err)
		return false
	}
	mine, _ := filepath.Abs(m.PluginsDir)
	if res.PluginsDir != "" && filepath.Clean(res.PluginsDir) != mine {
		fmt.Fprintf(m.Stderr, "weir: note: the daemon on %s serves the plugins in %s, not %s: it does not see this change\n", m.SocketPath, res.PluginsDir, mine)
		return true
	}
	printRescan(m, res)
	return true
}

func printRescan(m *Main, res *apitypes.PluginRescan) {
	var parts []string
	for _, c := range []struct {
		what  string
		names []string
	}{{"added", res.Added}, {"upgraded", res.Upgraded}, {"removed", res.Removed}} {
		if len(c.names) > 0 {
			parts = append(parts, c.what+" "+strings.Join(c.names, ", "))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no change")
	}
	fmt.Fprintf(m.Stdout, "daemon on %s rescanned %s: %s; %s in service\n", m.SocketPath, res.PluginsDir, strings.Join(parts, "; "), countTools(res.Tools))
	for _, p := range res.Unavailable {
		fmt.Fprintf(m.Stderr, "weir: plugin %s is unavailable to the daemon: %s\n", p.Name, p.Error)
	}
}

// pluginListing is the JSON form of `weir plugin ls --json`.
type pluginListing struct {
	PluginsDir string         `json:"plugins_dir"`
	Plugins    []pluginListed `json:"plugins"`
	Unpinned   []string       `json:"unpinned"`
}

type pluginListed struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Status is ok, modified (the binary no longer matches its pin: it
	// will not be launched), missing, or unreadable (no manifest).
	Status          string              `json:"status"`
	Error           string              `json:"error,omitempty"`
	ProtocolVersion int                 `json:"protocol_version,omitempty"`
	SDKVersion      string              `json:"sdk_version,omitempty"`
	Tools           []host.ToolManifest `json:"tools"`
}

func pluginLsCmd(m *Main) *cobra.Command {
	var asJSON bool
	var configPath string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List installed plugins, their tools, schemas and effect classes",
		Long: `List installed plugins, their tools, schemas and effect classes (read,
idempotent or at_most_once; +probe: the tool has a reconcile probe; weir
tool describe TOOL says more). A plugin whose
tools come from its config (llm's models, mcp's servers) lists none without
--config FILE, which lists what it declares when configured by that daemon
config file (launching it once if its manifest is not cached).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			cat, err := configuredCatalog(m, configPath)
			if err != nil {
				return err
			}
			unpinned, err := host.Unpinned(m.PluginsDir)
			if err != nil {
				return err
			}
			l := pluginListing{PluginsDir: m.PluginsDir, Unpinned: unpinned, Plugins: []pluginListed{}}
			if l.Unpinned == nil {
				l.Unpinned = []string{}
			}
			for _, p := range cat.Plugins() {
				e := pluginListed{Name: p.Name, Path: p.Path, SHA256: p.SHA256, Status: "ok", Tools: []host.ToolManifest{}}
				if p.Manifest != nil {
					e.ProtocolVersion, e.SDKVersion = p.Manifest.ProtocolVersion, p.Manifest.SDKVersion
					for _, t := range p.Manifest.Tools {
						t.Effect = t.Class() // always spelt out in the listing
						e.Tools = append(e.Tools, t)
					}
				}
				if err := p.Verify(); err != nil {
					e.Status, e.Error = "modified", err.Error()
					if _, serr := os.Stat(p.Path); serr != nil {
						e.Status = "missing"
					}
				} else if p.Err != nil {
					e.Status, e.Error = "unreadable", p.Err.Error()
				}
				l.Plugins = append(l.Plugins, e)
			}
			if asJSON {
				return printJSON(m.Stdout, l)
			}
			printPluginListing(m.Stdout, l)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the listing as JSON, with full schemas")
	cmd.Flags().StringVar(&configPath, "config", "", "list the plugins' tools as configured by this daemon config file")
	return cmd
}

func printPluginListing(w io.Writer, l pluginListing) {
	if len(l.Plugins) == 0 && len(l.Unpinned) == 0 {
		fmt.Fprintf(w, "no plugins installed in %s\n", l.PluginsDir)
		return
	}
	for i, p := range l.Plugins {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s  %s  %s  %s\n", p.Name, shortSum(p.SHA256), p.Status, countTools(len(p.Tools)))
		if p.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", p.Error)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range p.Tools {
			class := string(t.Class())
			if t.Reconcile {
				class += " +probe"
			}
			fmt.Fprintf(tw, "  %s\t%s\tcost %d\t%s\n", t.Name, class, t.Cost, t.Description)
		}
		tw.Flush()
		for _, t := range p.Tools {
			if len(t.InputSchema) > 0 {
				fmt.Fprintf(w, "  %s input: %s\n", t.Name, compactJSON(t.InputSchema))
			}
		}
	}
	for _, name := range l.Unpinned {
		fmt.Fprintf(w, "\n%s  unpinned: never launched; pin it with `weir plugin install %s/%s`\n", name, l.PluginsDir, name)
	}
}

func shortSum(sum string) string {
	if len(sum) > 12 {
		return "sha256:" + sum[:12]
	}
	return "sha256:" + sum
}

func countTools(n int) string {
	if n == 1 {
		return "1 tool"
	}
	return fmt.Sprintf("%d tools", n)
}

func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}
