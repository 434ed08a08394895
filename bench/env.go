package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/bench/internal/daemon"
	"github.com/weirhq/weir/bench/internal/limits"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// bench is what scenarios share: the binaries, a scratch directory, and the
// physical limits, each measured at most once per run so that every
// scenario that needs one compares against the same measurement whether it
// runs alone or in the full table.
type bench struct {
	ctx         context.Context
	log         io.Writer
	weir        string
	plugins     string
	root        string
	overloadFor time.Duration
	parked      int    // runs scenario 6 parks
	postgres    string // the server scenario 11 uses

	measured map[string]any
	echo     *limits.RawEcho
}

// Sizes of the limit measurements: large enough to average out a noisy
// machine, small enough to keep scenario 1 well under a minute.
const (
	fsyncOps       = 2000
	syncCommits1   = 2000
	syncCommits64  = 10000
	groupCommits   = 20000
	echoCalls1     = 5000
	echoCalls16    = 20000
	commitWriters  = 64
	echoFanCallers = 16
)

// once memoizes a limit by name.
func once[T any](b *bench, name string, measure func() (T, error)) (T, error) {
	if b.measured == nil {
		b.measured = map[string]any{}
	}
	if v, ok := b.measured[name]; ok {
		return v.(T), nil
	}
	fmt.Fprintf(b.log, "  measuring %s\n", name)
	v, err := measure()
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", name, err)
	}
	b.measured[name] = v
	return v, nil
}

// dir makes a fresh directory under the run's scratch directory.
func (b *bench) dir(name string) (string, error) {
	return os.MkdirTemp(b.root, name+"-")
}

func (b *bench) fsyncRate() (float64, error) {
	return once(b, "fsync rate", func() (float64, error) {
		d, err := b.dir("fsync")
		if err != nil {
			return 0, err
		}
		return limits.FsyncRate(d, fsyncOps)
	})
}

func (b *bench) badgerSync(writers int) (float64, error) {
	n := syncCommits1
	if writers > 1 {
		n = syncCommits64
	}
	return once(b, fmt.Sprintf("badger sync commits, %d writers", writers), func() (float64, error) {
		d, err := b.dir("badger")
		if err != nil {
			return 0, err
		}
		return limits.BadgerSyncCommits(d, writers, n)
	})
}

func (b *bench) groupCommit() (float64, error) {
	return once(b, "group commit, 64 writers", func() (float64, error) {
		d, err := b.dir("group")
		if err != nil {
			return 0, err
		}
		return limits.GroupCommits(b.ctx, d, commitWriters, groupCommits)
	})
}

// rawEcho starts (once) the raw go-plugin echo plugin.
func (b *bench) rawEcho() (*limits.RawEcho, error) {
	if b.echo != nil {
		return b.echo, nil
	}
	d, err := b.dir("rawecho")
	if err != nil {
		return nil, err
	}
	path, err := limits.BuildRawEcho(d)
	if err != nil {
		return nil, err
	}
	b.echo, err = limits.StartRawEcho(path)
	return b.echo, err
}

// payload100 is the 100-byte message of every echo measurement.
var payload100 = `{"data":"` + strings.Repeat("x", 100-len(`{"data":""}`)) + `"}`

// rawEchoCalls times the raw echo from callers goroutines.
func (b *bench) rawEchoCalls(callers int) (limits.Calls, error) {
	n := echoCalls1
	if callers > 1 {
		n = echoCalls16
	}
	return once(b, fmt.Sprintf("raw gRPC echo, %d callers", callers), func() (limits.Calls, error) {
		e, err := b.rawEcho()
		if err != nil {
			return limits.Calls{}, err
		}
		msg := wrapperspb.Bytes([]byte(payload100))
		call := func(ctx context.Context) error { return e.Echo(ctx, msg) }
		if _, err := limits.Measure(b.ctx, callers, 500, call); err != nil { // warm up
			return limits.Calls{}, err
		}
		return limits.Measure(b.ctx, callers, n, call)
	})
}

// startDaemon runs weir serve on a fresh data directory.
func (b *bench) startDaemon(name string, args ...string) (*daemon.Daemon, error) {
	return b.startDaemonEnv(name, nil, args...)
}

// startDaemonEnv is startDaemon with env added to the daemon's environment.
func (b *bench) startDaemonEnv(name string, env []string, args ...string) (*daemon.Daemon, error) {
	data, err := b.dir(name)
	if err != nil {
		return nil, err
	}
	return daemon.Start(daemon.Config{Weir: b.weir, Plugins: b.plugins, Data: data, Env: env, Args: append([]string{"--log-level", "warn"}, args...)})
}

// register registers one flow file on d.
func (b *bench) register(d *daemon.Daemon, name, src string) error {
	_, err := d.Client().FlowRegister(b.ctx, apitypes.SourceFile{Path: filepath.Join(name + ".star"), Src: src})
	return err
}

func (b *bench) close() {
	if b.echo != nil {
		b.echo.Close()
	}
}
