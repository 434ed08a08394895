package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var cfg engine.Config
		var grace time.Duration
		var logLevel string
		cmd := &cobra.Command{
			Use:   "serve",
			Short: "Run the weir daemon: the engine, recovery, and the API on the socket",
			Args:  exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				return m.serve(cmd.Context(), cfg, grace, logLevel)
			},
		}
		f := cmd.Flags()
		f.IntVar(&cfg.Workers, "workers", 64, "worker slots")
		f.IntVar(&cfg.MaxQueued, "max-queued", 10000, "runs accepted but not started before new ones are refused")
		f.DurationVar(&cfg.QueueTimeout, "queue-timeout", 10*time.Minute, "how long a task may wait for a slot before it is dropped")
		f.Int64Var(&cfg.MaxBudgetInFlight, "budget-in-flight", 0, "cost units running tasks may hold at once (0: unlimited)")
		f.Int64Var(&cfg.DefaultRunBudget, "run-budget", 0, "budget of runs whose flow declares none (0: unlimited)")
		f.DurationVar(&cfg.LeaseTimeout, "lease-timeout", 30*time.Second, "lease deadline; holders renew at a third of it")
		f.DurationVar(&grace, "grace", 30*time.Second, "how long held work may drain on stop before it is cancelled")
		f.StringVar(&logLevel, "log-level", "info", "trace, debug, info, warn or error")
		return cmd
	})
}

// serve runs the daemon until ctx ends (SIGINT/SIGTERM), then drains.
func (m *Main) serve(ctx context.Context, cfg engine.Config, grace time.Duration, logLevel string) error {
	log := m.newLogger("weir", logLevel)
	s, err := m.openStack(ctx, log, cfg)
	if err != nil {
		return err
	}
	ln, err := listenSocket(m.SocketPath)
	if err != nil {
		s.close(context.Background())
		return err
	}
	srv := &http.Server{Handler: api.NewServer(s.eng, log.Named("api")), ConnContext: api.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", "socket", m.SocketPath, "data", m.DataDir, "plugins", m.PluginsDir)

	select {
	case <-ctx.Done():
	case err = <-served:
	}
	log.Info("stopping: admission closed, draining", "grace", grace)
	dctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	stopErr := s.eng.Stop(dctx) // admission closes first: new starts get E_DRAINING
	_ = srv.Shutdown(context.Background())
	if cerr := s.close(context.Background()); stopErr == nil {
		stopErr = cerr
	}
	_ = os.Remove(m.SocketPath)
	log.Info("stopped")
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return stopErr
}

// listenSocket listens on the Unix socket, owner-only. A stale socket file
// left by a killed daemon is replaced; a live one is refused.
func listenSocket(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another daemon answers on %s", path)
		}
		_ = os.Remove(path)
	}
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
