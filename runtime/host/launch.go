package host

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/sdk/wire"
)

const (
	defaultMaxMessageBytes = 4 << 20
	defaultStartTimeout    = 10 * time.Second
	// wireOverhead is what the protobuf envelope of a call adds to its
	// input: the send limit is MaxMessageBytes plus this.
	wireOverhead = 64 << 10
)

// passEnv is the part of weir's environment a plugin inherits. Plugins are
// untrusted: secrets in weir's environment stay there.
var passEnv = []string{
	"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", wire.EnvLogLevel,
}

// launchSpec says how to start one plugin process.
type launchSpec struct {
	name         string // pinned name; "" at install
	path         string
	sum          []byte
	stateDir     string // "" for manifest-only launches at install
	config       json.RawMessage
	env          []string // names of weir's variables passed to this plugin alone
	memoryMax    int64    // RLIMIT_DATA in bytes; 0: none
	logger       hclog.Logger
	maxMsg       int
	startTimeout time.Duration
	// manifestChanged is told each manifest a revision-2 plugin sends
	// after launch (nil: not watched, as for a manifest-only launch).
	manifestChanged func(*instance)
}

// instance is one running plugin process and its connection.
type instance struct {
	client   *plugin.Client
	cmd      *exec.Cmd
	rpc      wire.PluginClient
	manifest *PluginManifest
	stderr   *textbound.Tail

	// watchers maps call ids to the progressWatch of calls that want
	// progress; readProgress dispatches the plugin's reports to them.
	watchers       sync.Map
	progressCancel context.CancelFunc
	progressDone   chan struct{}
	// partials routes the pieces of output of calls that want them.
	partials partialsStream
	// latest is the last manifest the plugin sent after launch (nil:
	// the launch's); watchDone is closed when its stream ends.
	latest    atomic.Pointer[PluginManifest]
	watchDone chan struct{}

	retireOnce sync.Once

	// conn is the plugin's gRPC connection, which the health ping uses.
	conn *grpc.ClientConn
	// inFlight counts the calls on this process; watchHealth pings it
	// while there are any, from the first call (watchOnce) until ended
	// is closed. hung says why watchHealth killed it, for its calls.
	inFlight  atomic.Int64
	watchOnce sync.Once
	ended     chan struct{}
	endOnce   sync.Once
	hung      atomic.Pointer[string]
	pings     atomic.Int64 // answered, for tests
}

// progressWatch delivers one call's progress to its callback until the call
// returns.
type progressWatch struct {
	mu       sync.Mutex
	fn       func(done, total int64)
	closed   bool
	received int64
	signal   chan struct{} // a report was delivered
}

func newProgressWatch(fn func(done, total int64)) *progressWatch {
	return &progressWatch{fn: fn, signal: make(chan struct{}, 1)}
}

func (w *progressWatch) report(done, total int64) {
	w.mu.Lock()
	if !w.closed {
		w.fn(done, total)
		w.received++
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// close waits, at most progressFlush, until the sent reports the plugin
// counted have been delivered, then delivers no more.
func (w *progressWatch) close(sent int64) {
	timer := time.NewTimer(progressFlush)
	defer timer.Stop()
	for {
		w.mu.Lock()
		if w.received >= sent {
			w.closed = true
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		select {
		case <-w.signal:
		case <-timer.C:
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
			return
		}
	}
}

// progressFlush bounds how long a call's result waits for its last
// progress reports.
const progressFlush = 100 * time.Millisecond

// readProgress runs for the life of the instance's Progress stream.
func (i *instance) readProgress(stream wire.Plugin_ProgressClient) {
	defer close(i.progressDone)
	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}
		if w, ok := i.watchers.Load(ev.GetCallId()); ok {
			w.(*progressWatch).report(ev.GetDone(), ev.GetTotal())
		}
	}
}

// launch starts the plugin, verifies its checksum (go-plugin's
// SecureConfig, before exec), negotiates the protocol version (refusing
// another one before dialing), and fetches and checks its manifest.
// Errors are *ToolError of kind KindChecksum, KindProtocol or KindCrashed.
func launch(spec launchSpec) (*instance, error) {
	for attempt := 1; ; attempt++ {
		inst, busy, err := launchOnce(spec)
		// A binary just written (Install's copy) can fail to exec with
		// ETXTBSY while another goroutine's fork still holds the write
		// descriptor (golang/go#22315); it clears in milliseconds.
		if busy && attempt < 5 {
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
			continue
		}
		return inst, err
	}
}

func launchOnce(spec launchSpec) (_ *instance, busy bool, _ error) {
	who := spec.name
	if who == "" {
		who = spec.path
	}
	if spec.stateDir != "" {
		if err := os.MkdirAll(spec.stateDir, 0o700); err != nil {
			return nil, false, toolErrorf(KindCrashed, who, "state directory: %v", err)
		}
	}
	cmd := exec.Command(spec.path)
	cmd.Dir = spec.stateDir
	dieWithHost(cmd)
	ownGroup(cmd)
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for _, k := range spec.env {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env,
		wire.EnvStateDir+"="+spec.stateDir,
		wire.EnvConfig+"="+string(spec.config),
		wire.EnvName+"="+spec.name,
	)
	logger := hclog.Logger(newPluginLogger(spec.logger.Named("plugin")))
	named := logger
	if spec.name != "" {
		named = spec.logger.Named("plugin").Named(spec.name)
	}
	// One line buffer per stream: go-plugin forwards the plugin's stdout
	// and stderr in chunks of either, in no set order, so a shared buffer
	// would splice a chunk of one into a line of the other.
	stdout, stderr := &lineLogger{log: named}, &lineLogger{log: named}
	tail := textbound.NewTail(4 << 10) // the last of its raw stderr, to explain a failed launch
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.VersionedPlugins(nil),
		Cmd:              cmd,
		SecureConfig:     &plugin.SecureConfig{Checksum: spec.sum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		StartTimeout:     spec.startTimeout,
		SkipHostEnv:      true,
		Stderr:           tail,
		// Longer lines of the plugin's stderr arrive in pieces of
		// MaxPluginLogLine, which pluginLogger cuts.
		PluginLogBufferSize: MaxPluginLogLine,
		SyncStdout:          stdout,
		SyncStderr:          stderr,
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(spec.maxMsg+wireOverhead),
			grpc.MaxCallSendMsgSize(spec.maxMsg+wireOverhead),
		)},

		// Mutual TLS on the plugin's socket, with a key pair made for this
		// launch on each side: a local process that reaches the socket (a
		// permissive umask, say) cannot call tools around weir. The SDK's
		// plugin.Serve answers it on its own.
		AutoMTLS: true,
	})
	inst := &instance{client: client, cmd: cmd, stderr: tail, ended: make(chan struct{})}
	fail := func(kind Kind, format string, args ...any) (*instance, bool, error) {
		inst.kill()
		te := toolErrorf(kind, who, format, args...)
		if s := strings.TrimSpace(tail.String()); s != "" {
			te.Message += "; plugin stderr: " + s
		}
		return nil, false, te
	}
	rpcClient, err := client.Client()
	if err != nil {
		// go-plugin's errors are untyped apart from the checksum one.
		msg := err.Error()
		switch {
		case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
			return fail(KindChecksum, "binary %s does not match its pinned SHA-256 %s: reinstall it with `weir plugin install`", spec.path, hex.EncodeToString(spec.sum))
		case strings.HasPrefix(msg, "error verifying checksum"):
			return fail(KindChecksum, "%s", msg)
		case strings.Contains(msg, "incompatible API version"), strings.Contains(msg, "incompatible core API version"),
			strings.Contains(msg, "unsupported plugin protocol"):
			return fail(KindProtocol, "refused before connecting: %s", msg)
		case strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
			// go-plugin reads the handshake with a bufio.Scanner: a first
			// line past its 64 KiB ends the read as if stdout had closed.
			return fail(KindProtocol, "not a weir plugin: no handshake line on its stdout (it printed nothing before exiting, or a first line longer than %d KiB)", bufio.MaxScanTokenSize>>10)
		case strings.Contains(msg, "Unrecognized remote plugin message") && strings.TrimSpace(tail.String()) != "":
			// It said why on stderr before its handshake (a config its
			// Tools refused, say): that is the message, not go-plugin's
			// guesses about architectures and permissions.
			return fail(KindProtocol, "the plugin stopped before its handshake")
		case strings.Contains(msg, "Unrecognized remote plugin message"):
			return fail(KindProtocol, "not a weir plugin: %s", msg)
		case errors.Is(err, syscall.ETXTBSY) || strings.Contains(msg, "text file busy"):
			_, _, err := fail(KindCrashed, "starting plugin: %s", msg)
			return nil, true, err
		}
		return fail(KindCrashed, "starting plugin: %s", msg)
	}
	if spec.memoryMax > 0 {
		// The cap is set on the started process: Go cannot set a limit
		// between fork and exec. It holds from the handshake on, before
		// any call.
		if err := setMemoryMax(inst.pid(), spec.memoryMax); err != nil {
			return fail(KindCrashed, "setting memory_max: %v", err)
		}
	}
	if gc, ok := rpcClient.(*plugin.GRPCClient); ok {
		inst.conn = gc.Conn
	}
	raw, err := rpcClient.Dispense(wire.PluginName)
	if err != nil {
		return fail(KindProtocol, "%v", err)
	}
	inst.rpc = raw.(wire.PluginClient)
	ctx, cancel := context.WithTimeout(context.Background(), spec.startTimeout)
	defer cancel()
	// The handshake picked the highest revision both sides speak; the
	// manifest must be in it.
	version := uint32(client.NegotiatedVersion())
	resp, err := inst.rpc.Manifest(ctx, &wire.ManifestRequest{ProtocolVersion: version})
	if err != nil {
		return fail(KindProtocol, "fetching manifest: %v", err)
	}
	if resp.GetProtocolVersion() != version {
		return fail(KindProtocol, "bad manifest: protocol version %d, the handshake said %d", resp.GetProtocolVersion(), version)
	}
	m, err := manifestFromWire(spec.name, hex.EncodeToString(spec.sum), resp)
	if err != nil {
		return fail(KindProtocol, "bad manifest: %v", err)
	}
	m.ConfigHash = ConfigHash(spec.config, spec.env)
	inst.manifest = m
	pctx, pcancel := context.WithCancel(context.Background())
	stream, err := inst.rpc.Progress(pctx, &wire.ProgressRequest{})
	if err != nil {
		pcancel()
		return fail(KindProtocol, "opening the progress stream: %v", err)
	}
	inst.progressCancel, inst.progressDone = pcancel, make(chan struct{})
	go inst.readProgress(stream)
	inst.openPartials(pctx)
	if err := inst.watchManifest(pctx, spec); err != nil {
		return fail(KindProtocol, "opening the manifest stream: %v", err)
	}
	return inst, false, nil
}

// pid returns the plugin's process id (0 if it never started).
func (i *instance) pid() int {
	if i.cmd.Process == nil {
		return 0
	}
	return i.cmd.Process.Pid
}

// stop ends the plugin gracefully (go-plugin asks it to shut down, then
// kills it after two seconds) and waits for go-plugin's goroutines. Those
// wait for the plugin's stdout and stderr to close, which a descendant of
// the plugin may hold open for ever: past stopGrace its group is killed.
func (i *instance) stop() {
	t := time.AfterFunc(stopGrace, i.killGroup)
	i.client.Kill()
	t.Stop()
	i.endProgress()
}

// stopGrace is how long stop waits for go-plugin's own shutdown (two
// seconds of grace, then SIGKILL of the plugin alone) before it kills the
// plugin's whole group.
const stopGrace = 3 * time.Second

// kill ends the plugin and its descendants at once with SIGKILL, then lets
// go-plugin clean up.
func (i *instance) kill() {
	i.killGroup()
	i.client.Kill()
	i.endProgress()
}

// killGroup sends SIGKILL to the plugin and to every process it started
// in its group (a shell script's children, a helper it forked): left
// alive, one of them holding the plugin's stdout would keep go-plugin,
// and so the launch or the stop, waiting until it exits. A process
// go-plugin has reaped is not signalled: its pid may be another's now.
func (i *instance) killGroup() {
	if i.cmd.Process == nil || i.client.Exited() {
		return
	}
	_ = killGroup(i.cmd.Process.Pid)
	_ = i.cmd.Process.Kill() // a plugin that left its group
}

func (i *instance) endProgress() {
	i.endOnce.Do(func() { close(i.ended) })
	if i.progressCancel != nil {
		i.progressCancel()
		<-i.progressDone
		if i.partials.done != nil {
			<-i.partials.done
		}
		if i.watchDone != nil {
			<-i.watchDone
		}
	}
}

// ping asks the plugin, through gRPC's health service that go-plugin
// registers in every plugin, whether it still serves, within timeout.
func (i *instance) ping(timeout time.Duration) error {
	if i.conn == nil {
		return nil // not a gRPC plugin: nothing to ask (never launched so)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(i.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: plugin.GRPCServiceName})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health status %s", resp.GetStatus())
	}
	i.pings.Add(1)
	return nil
}

// lineLogger turns what a plugin writes to its os.Stdout or its os.Stderr
// (one lineLogger each; go-plugin forwards both over its stdio stream)
// into log lines of at most MaxPluginLogLine bytes, escaped: a longer line
// is logged cut, and what is cut from it only counted.
type lineLogger struct {
	mu      sync.Mutex
	buf     []byte
	dropped int // bytes cut from the current line so far
	log     hclog.Logger
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		switch {
		case l.dropped > 0:
			l.dropped += len(chunk)
		case len(l.buf)+len(chunk) > MaxPluginLogLine:
			room := MaxPluginLogLine - len(l.buf)
			l.buf = append(l.buf, chunk[:room]...)
			l.log.Info(escape.String(string(l.buf))+" ...", "cut_at_bytes", MaxPluginLogLine)
			l.buf = l.buf[:0]
			l.dropped = len(chunk) - room
		default:
			l.buf = append(l.buf, chunk...)
		}
		if i < 0 {
			break
		}
		if l.dropped > 0 {
			l.log.Info("the plugin's last output line was cut", "dropped_bytes", l.dropped, "max_line_bytes", MaxPluginLogLine)
		} else {
			l.log.Info(escape.String(string(l.buf)))
		}
		l.buf, l.dropped = l.buf[:0], 0
		p = p[i+1:]
	}
	return n, nil
}
