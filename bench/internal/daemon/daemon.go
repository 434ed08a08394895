// Package daemon starts and kills real `weir serve` processes for the
// benchmark driver and the soak: the same binary and plugins an operator
// runs, driven through the same Unix-socket API client (runtime/api/client)
// the CLI uses.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/client"
)

// Config says how to run one daemon.
type Config struct {
	// Weir is the weir binary; Plugins the pinned plugins directory.
	Weir, Plugins string
	// Data is the data directory. It is kept across restarts.
	Data string
	// Socket is the API socket; "" picks a short path in a new temporary
	// directory (Unix socket paths are limited to about 100 bytes).
	Socket string
	// Args are extra `weir serve` flags, e.g. --workers 4.
	Args []string
	// Env is added to the daemon's environment, e.g. WEIR_FAILPOINT=...
	Env []string
	// StartTimeout bounds the wait for the socket to answer (default 30s).
	StartTimeout time.Duration
}

// Daemon is one running `weir serve` process.
type Daemon struct {
	cfg    Config
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the process's exit, set before exited closes
	logs   *textbound.Tail
	client *client.Client
	ownDir string // socket directory made by Start, removed on exit
}

// Start runs `weir serve` with cfg and returns once its socket answers
// GET /v1/health. It fails if the process exits first or the wait times out.
func Start(cfg Config) (*Daemon, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	d := &Daemon{cfg: cfg, exited: make(chan struct{}), logs: textbound.NewTail(64 << 10)}
	if cfg.Socket == "" {
		dir, err := os.MkdirTemp("", "wsock")
		if err != nil {
			return nil, err
		}
		d.ownDir = dir
		d.cfg.Socket = filepath.Join(dir, "s")
	}
	args := append([]string{"--data", cfg.Data, "--plugins", cfg.Plugins, "--socket", d.cfg.Socket, "serve"}, cfg.Args...)
	d.cmd = exec.Command(cfg.Weir, args...)
	d.cmd.Env = append(os.Environ(), cfg.Env...)
	d.cmd.Stdout = d.logs
	d.cmd.Stderr = d.logs
	if err := d.cmd.Start(); err != nil {
		d.cleanup()
		return nil, err
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	d.client = client.NewUnix(d.cfg.Socket, client.WithMaxIdleConns(256))
	deadline := time.Now().Add(cfg.StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := d.client.Health(ctx)
		cancel()
		if err == nil && st.Open() {
			return d, nil
		}
		select {
		case <-d.exited:
			d.cleanup()
			return nil, &ExitError{Err: d.err, SIGKILL: d.KilledBySIGKILL(), Log: d.Log()}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = d.Kill()
			return nil, fmt.Errorf("weir serve did not answer on %s within %v\n%s", d.cfg.Socket, cfg.StartTimeout, d.Log())
		}
	}
}

// ExitError says the daemon ended before it served: a failpoint armed for
// recovery kills it there (SIGKILL), a bad configuration ends it otherwise.
type ExitError struct {
	Err     error
	SIGKILL bool
	Log     string // the tail of its output
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("weir serve exited before serving (%v)\n%s", e.Err, e.Log)
}

// Client is the API client on this daemon's socket.
func (d *Daemon) Client() *client.Client { return d.client }

// Socket is the daemon's socket path.
func (d *Daemon) Socket() string { return d.cfg.Socket }

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Log returns the tail of the daemon's output.
func (d *Daemon) Log() string { return strings.ToValidUTF8(d.logs.String(), "?") }

// Exited is closed when the process has ended.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// KilledBySIGKILL reports whether the ended process died of SIGKILL, as a
// failpoint or Kill makes it. It is false while the process runs.
func (d *Daemon) KilledBySIGKILL() bool {
	select {
	case <-d.exited:
	default:
		return false
	}
	var ee *exec.ExitError
	if !errors.As(d.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Kill sends SIGKILL (if the process still runs) and waits for it to end.
func (d *Daemon) Kill() error {
	select {
	case <-d.exited:
	default:
		if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		<-d.exited
	}
	d.cleanup()
	return nil
}

// Stop sends SIGTERM and waits up to timeout for a clean exit; past it the
// process is killed and an error returned.
func (d *Daemon) Stop(timeout time.Duration) error {
	select {
	case <-d.exited:
		d.cleanup()
		return d.exitErr()
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-d.exited:
		d.cleanup()
		return d.exitErr()
	case <-time.After(timeout):
		_ = d.Kill()
		return fmt.Errorf("weir serve did not stop within %v\n%s", timeout, d.Log())
	}
}

func (d *Daemon) exitErr() error {
	if d.err != nil {
		return fmt.Errorf("weir serve: %w\n%s", d.err, d.Log())
	}
	return nil
}

func (d *Daemon) cleanup() {
	if d.client != nil {
		d.client.Close()
	}
	if d.ownDir != "" {
		os.RemoveAll(d.ownDir)
	}
}
