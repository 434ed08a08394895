package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/mcpserver"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var listen, daemon string
		var follow time.Duration
		var stateless bool
		cmd := &cobra.Command{
			Use:   "mcp",
			Short: "Offer the registered flows to MCP clients as tools",
			Long: `Speak the Model Context Protocol so that MCP clients (desktop assistants,
IDEs, agent CLIs) can start weir flows as tools. Each registered flow is a
tool (its doc, its input schema); a call starts a run and answers its output
or its error with code and class; a run still working after --follow (55 s,
below the 60 s clients time out at) answers its id and phase, and wait_run
waits on. A run waiting for a human decision asks for it (elicitation), or
answers how to decide it (approve_wait, reject_wait). cancel_run cancels a
run; weir://runs/ID and weir://runs/ID/timeline are its state and timeline.
Pass weir_request_id to make a retried call return the same run. See
docs/mcp.md.

Without --listen, MCP is spoken on stdin/stdout to the daemon on the socket:
the caller is your OS user. With --listen ADDR (loopback only), the
streamable HTTP transport is served at http://ADDR/mcp; every request must
carry "Authorization: Bearer TOKEN" with a token of the daemon's TCP
listener, which --daemon names (http://HOST:PORT): the caller is the
token's owner. --stateless serves without sessions (every request checked
on its own; protocol 2026-07-28 needs it).`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				o := mcpserver.Options{Follow: follow, Stateless: stateless, Version: version, Logger: slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
				if listen == "" {
					if daemon != "" {
						return commandUsageErrorf(cmd, "--daemon goes with --listen (on stdio weir mcp talks to the socket)")
					}
					if stateless {
						return commandUsageErrorf(cmd, "--stateless goes with --listen (stdio is one session)")
					}
					return m.mcpStdio(cmd.Context(), o)
				}
				if daemon == "" {
					return commandUsageErrorf(cmd, "--listen needs --daemon http://HOST:PORT, the daemon's TCP listener whose tokens the clients send")
				}
				return m.mcpHTTP(cmd.Context(), listen, daemon, o)
			},
		}
		cmd.Flags().StringVar(&listen, "listen", "", "serve streamable HTTP on this loopback address instead of stdio")
		cmd.Flags().StringVar(&daemon, "daemon", "", "with --listen: the daemon's TCP listener, http://HOST:PORT")
		cmd.Flags().DurationVar(&follow, "follow", mcpserver.DefaultFollow, "how long one call follows its run before answering its id and phase (below the client's request timeout)")
		cmd.Flags().BoolVar(&stateless, "stateless", false, "with --listen: serve without sessions, checking the token at every request (protocol 2026-07-28)")
		return cmd
	})
}

func (m *Main) mcpStdio(ctx context.Context, o mcpserver.Options) error {
	s := mcpserver.New(m.api(), o)
	t := &mcp.IOTransport{Reader: io.NopCloser(m.Stdin), Writer: nopWriteCloser{m.Stdout}}
	if err := s.Serve(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		if errors.Is(err, client.ErrNoDaemon) {
			return m.apiFailure(err)
		}
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func (m *Main) mcpHTTP(ctx context.Context, listen, daemon string, o mcpserver.Options) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--listen %q: want HOST:PORT", listen)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return &exitError{code: exitUsage, err: fmt.Errorf("--listen %q: weir mcp serves loopback addresses only (127.0.0.1, ::1, localhost)", listen)}
	}
	if _, err := client.New(daemon); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--daemon: %v", err)}
	}
	var mu sync.Mutex
	var clients []*client.Client
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
	}()
	h := mcpserver.Handler(func(token string) mcpserver.Daemon {
		c, _ := client.New(daemon, client.WithToken(token)) // checked above
		mu.Lock()
		clients = append(clients, c)
		mu.Unlock()
		return c
	}, o)
	defer h.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(m.Stderr, "weir mcp: serving MCP at http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return &exitError{code: exitFailed, err: err}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}
