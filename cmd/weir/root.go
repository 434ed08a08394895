package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/tlscert"
)

// Exit codes shared by every command.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and the answer is "no" (diagnostics, failed run)
	exitUsage   = 2 // the command line itself is wrong
	exitWaiting = 3 // a run is suspended on a human wait
)

// exitError carries an exit code up to Run; its message (if any) is printed
// to stderr.
type exitError struct {
	code int
	err  error
	// hint is printed on a line of its own after err: where to read how
	// the command is used.
	hint string
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf reports a wrong command line (exit 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// commandUsageErrorf reports a wrong command line of cmd (exit 2) and points
// at cmd's help.
func commandUsageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...), hint: helpHint(cmd)}
}

func helpHint(cmd *cobra.Command) string {
	return fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())
}

// exitCode ends a command with code and no further message: the command has
// already said what it had to.
func exitCode(code int) error { return &exitError{code: code} }

// Main holds what every command shares: the streams and the global settings.
// Tests build one with NewMain, set Env and run it in-process.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Env looks up environment variables; tests replace it.
	Env func(string) string

	// Global settings, resolved by resolveGlobals before a command runs.
	DataDir    string
	PluginsDir string
	SocketPath string
	// Address is a TCP listener's URL the commands talk to instead of
	// the socket ("": the socket), with the options its client needs.
	Address string
	apiOpts []client.Option

	flagData, flagPlugins, flagSocket, flagAddress, flagTLSCA string

	// clients made by api, closed when Run returns so that an in-process
	// run leaves no idle connection behind.
	clients []*client.Client
}

// NewMain returns a Main reading the process environment.
func NewMain() *Main { return &Main{Env: os.Getenv} }

// commandGroups is filled by each command file's init, one file per group.
var commandGroups []func(m *Main) *cobra.Command

func registerCommand(f func(m *Main) *cobra.Command) { commandGroups = append(commandGroups, f) }

// Run executes the command line args and returns the process exit code.
func (m *Main) Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Everything printed may quote what other users wrote (a flow's doc,
	// a run's error) or what a plugin logged: control characters are
	// escaped on the way out, so none reaches a terminal.
	eout, eerr := escape.NewWriter(stdout), escape.NewWriter(stderr)
	defer eout.Flush()
	defer eerr.Flush()
	stdout, stderr = eout, eerr
	m.Stdin, m.Stdout, m.Stderr = stdin, stdout, stderr
	if m.Env == nil {
		m.Env = os.Getenv
	}
	root := m.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	for _, c := range m.clients {
		c.Close()
	}
	m.clients = nil
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "weir:", ee.err)
		}
		if ee.hint != "" {
			fmt.Fprintln(stderr, ee.hint)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "weir:", err)
	if strings.HasPrefix(err.Error(), "unknown command") {
		return exitUsage
	}
	return exitFailed
}

func (m *Main) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir is a durable runtime for agent flows",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return m.resolveGlobals()
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&m.flagData, "data", "", "data directory (env WEIR_DATA, default $XDG_DATA_HOME/weir)")
	pf.StringVar(&m.flagPlugins, "plugins", "", "plugins directory (env WEIR_PLUGINS, default DATA/plugins)")
	pf.StringVar(&m.flagSocket, "socket", "", "daemon socket (env WEIR_SOCKET, default DATA/weir.sock)")
	pf.StringVar(&m.flagAddress, "address", "", "talk to the daemon's TCP listener at this URL, https://HOST:PORT or http://..., instead of the socket (env WEIR_ADDRESS; the token from env WEIR_TOKEN)")
	pf.StringVar(&m.flagTLSCA, "tls-ca", "", "PEM file of the CA certificates that verify an https:// --address (env WEIR_TLS_CA, default the system's roots)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err, hint: helpHint(cmd)}
	})
	for _, g := range commandGroups {
		root.AddCommand(g(m))
	}
	return root
}

// resolveGlobals applies the precedence flag > env var > default; an empty
// env var counts as unset.
func (m *Main) resolveGlobals() error {
	pick := func(flag, env string) string {
		if flag != "" {
			return flag
		}
		return m.Env(env)
	}
	m.DataDir = pick(m.flagData, "WEIR_DATA")
	if m.DataDir == "" {
		base := m.Env("XDG_DATA_HOME")
		if base == "" {
			home := m.Env("HOME")
			if home == "" {
				return usageErrorf("cannot find a data directory: set --data, WEIR_DATA, XDG_DATA_HOME or HOME")
			}
			base = filepath.Join(home, ".local", "share")
		}
		m.DataDir = filepath.Join(base, "weir")
	}
	m.PluginsDir = pick(m.flagPlugins, "WEIR_PLUGINS")
	if m.PluginsDir == "" {
		m.PluginsDir = filepath.Join(m.DataDir, "plugins")
	}
	m.SocketPath = pick(m.flagSocket, "WEIR_SOCKET")
	if m.SocketPath == "" {
		m.SocketPath = filepath.Join(m.DataDir, "weir.sock")
	}
	return m.resolveAddress(pick(m.flagAddress, "WEIR_ADDRESS"), pick(m.flagTLSCA, "WEIR_TLS_CA"))
}

// resolveAddress checks the TCP address and the CA file once, before a
// command runs, so that api cannot fail.
func (m *Main) resolveAddress(addr, caFile string) error {
	m.Address, m.apiOpts = "", nil
	if addr == "" {
		if caFile != "" && m.flagTLSCA != "" {
			return usageErrorf("--tls-ca verifies an https:// --address; there is none (the socket needs no certificate)")
		}
		return nil
	}
	if !strings.HasPrefix(addr, "https://") && !strings.HasPrefix(addr, "http://") {
		return usageErrorf("--address %q: write https://HOST:PORT (or http:// for a listener without TLS)", addr)
	}
	if token := m.Env("WEIR_TOKEN"); token != "" {
		m.apiOpts = append(m.apiOpts, client.WithToken(token))
	}
	if strings.HasPrefix(addr, "https://") {
		cfg, err := tlscert.ClientConfig(caFile)
		if err != nil {
			return usageErrorf("--tls-ca: %v", err)
		}
		m.apiOpts = append(m.apiOpts, client.WithTLSConfig(cfg))
	} else if caFile != "" {
		return usageErrorf("--tls-ca verifies an https:// address, and %s is plain http://", addr)
	}
	if _, err := client.New(addr, m.apiOpts...); err != nil {
		return usageErrorf("--address: %v", err)
	}
	m.Address = addr
	return nil
}

// untrusted says, for an error of a TLS handshake whose certificate the
// client could not verify, what to do about it; other errors are nil.
func (m *Main) untrusted(err error) error {
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) {
		return nil
	}
	return fmt.Errorf("%s presented a certificate this client does not trust (%v): pass --tls-ca (or WEIR_TLS_CA) with the CA that signed it", m.Address, ve.Err)
}

// daemonAt names where the commands look for the daemon, for messages.
func (m *Main) daemonAt() string {
	if m.Address != "" {
		return m.Address
	}
	return m.SocketPath
}

// api returns a client of the daemon: on --address if given, else on the
// socket. --socket is always a socket's path, whatever it looks like.
func (m *Main) api() *client.Client {
	c := client.NewUnix(m.SocketPath)
	if m.Address != "" {
		c, _ = client.New(m.Address, m.apiOpts...) // checked by resolveAddress
	}
	m.clients = append(m.clients, c)
	return c
}

// exactArgs is cobra.ExactArgs with a usage exit code.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return commandUsageErrorf(cmd, "%s takes %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs with a usage exit code.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return commandUsageErrorf(cmd, "%s needs at least %d argument(s)", cmd.CommandPath(), n)
		}
		return nil
	}
}

// rmCmd is the rm NAME command of a thing the daemon keeps by name (a
// trigger, a schedule), which remove removes through the client; the
// runs it started are not touched.
func (m *Main) rmCmd(what string, remove func(c *client.Client, ctx context.Context, name string) error) *cobra.Command {
	return &cobra.Command{
		Use: "rm NAME", Short: "Remove a " + what + " (its runs are not touched)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := remove(m.api(), cmd.Context(), args[0]); err != nil {
				return m.apiFailure(err)
			}
			fmt.Fprintf(m.Stdout, "%s %s removed\n", what, args[0])
			return nil
		},
	}
}
