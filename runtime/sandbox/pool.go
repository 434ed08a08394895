package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/internal/proclimit"
)

// Limits of a worker and of one evaluation, when Config sets none.
const (
	// DefaultMemory is a worker's RLIMIT_DATA: its heap, every evaluator
	// it keeps included.
	DefaultMemory int64 = 512 << 20
	// DefaultTimeout is the wall deadline of one request: a step's
	// callables, or one registration's load and checks. Its CPU allowance
	// is the same number of seconds. The step limit ends an ordinary
	// runaway script within a few seconds; the deadline is for what steps
	// do not count, and it is how long a bomb can hold a worker that
	// other users' evaluations wait for.
	DefaultTimeout = 10 * time.Second
	// DefaultLifetimeCPU is a worker's lifetime CPU (RLIMIT_CPU hard
	// limit); a worker past half of it is retired after its request.
	DefaultLifetimeCPU = time.Hour
	// MaxMessageBytes bounds one request or answer on a worker's pipe: a
	// step's ctx (input and results) and its callables' values, or a
	// registration's files and module.
	MaxMessageBytes = 64 << 20
)

// stderrHead is how much of a worker's stderr is kept to tell why it died:
// the Go runtime's fatal error comes first, before the goroutine dump.
const stderrHead = 4 << 10

// errRequestTooLarge is a request refused for its size before any of it
// was written: the worker stays usable.
var errRequestTooLarge = errors.New("request not sent")

// exitGrace is how long a worker that broke off an exchange is given to
// exit on its own before it is killed.
const exitGrace = time.Second

// Config configures a Pool. The zero Config uses the defaults and starts
// this binary (os.Executable) as the worker.
type Config struct {
	// Workers is the most worker processes at once (default: GOMAXPROCS).
	// An evaluation waits for a free one, in its owner's line (see
	// owner.Slots): a worker that frees goes to the owner using fewest,
	// so one owner's evaluations wait behind its own, not everyone's.
	Workers int
	// Spare is how many more workers may run for owners below their share
	// (default: a quarter of Workers, at least one): an owner whose
	// first evaluation arrives while another owner's callables hold
	// every worker to their deadline starts at once instead of after
	// them (owner.NewSlotsWithSpare). Negative: none.
	Spare int
	// Memory is each worker's RLIMIT_DATA in bytes (DefaultMemory).
	Memory int64
	// Timeout is one request's wall deadline and CPU allowance
	// (DefaultTimeout).
	Timeout time.Duration
	// LifetimeCPU is each worker's lifetime CPU (DefaultLifetimeCPU).
	LifetimeCPU time.Duration
	// Lang is the flow language the pool's requests name (LangStarlark).
	Lang string
	// Command is the worker's command line (default: this binary, with
	// no arguments; its environment is only EnvWorker and the Go
	// runtime's settings).
	Command []string
	// MaxMessageBytes bounds one request or answer (MaxMessageBytes, at
	// most).
	MaxMessageBytes int
	// MaxBatch is the most Calls that share one round trip (DefaultBatch;
	// 1: each Call goes alone).
	MaxBatch int

	// noMemoryCap: the worker is this race-instrumented binary.
	noMemoryCap bool
}

func (c Config) withDefaults() (Config, error) {
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.Spare == 0 {
		c.Spare = (c.Workers + 3) / 4
	}
	if c.Memory <= 0 {
		c.Memory = DefaultMemory
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.LifetimeCPU <= 0 {
		c.LifetimeCPU = DefaultLifetimeCPU
	}
	if c.Lang == "" {
		c.Lang = LangStarlark
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultBatch
	}
	if c.MaxMessageBytes <= 0 || c.MaxMessageBytes > MaxMessageBytes {
		c.MaxMessageBytes = MaxMessageBytes
	}
	if len(c.Command) == 0 {
		// /proc/self/exe is the running image even after an upgrade
		// replaced the file: workers always speak this binary's protocol.
		exe := "/proc/self/exe"
		if !fileExists(exe) {
			var err error
			if exe, err = os.Executable(); err != nil {
				return c, fmt.Errorf("sandbox: finding this binary to start workers: %w", err)
			}
		}
		c.Command = []string{exe}
		c.noMemoryCap = raceBuild
	}
	return c, nil
}

// ErrClosed is returned by a Pool that was closed.
var ErrClosed = errors.New("sandbox: pool closed")

// Pool evaluates scripts in worker processes; it implements flows.Scripts
// and is safe for concurrent use. Workers start on first use and are kept:
// a worker costs one process start, then a request costs one round trip on
// its pipe. A worker that dies or overruns its deadline is killed and
// replaced by the next request.
type Pool struct {
	cfg Config
	// slots are the workers that may run, shared between owners: an
	// evaluation takes one for the owner its ctx names (owner.From).
	slots *owner.Slots
	done  chan struct{} // closed by Close
	mu    sync.Mutex
	idle  []*worker
	all   map[*worker]bool
	shut  bool
	// waiting are the Calls that wait for a worker, by owner, oldest
	// first: the next Call of that owner to take a worker takes them
	// along (evaluate). A batch never holds two owners' Calls.
	waiting map[string][]*waitingCall

	// batchHook, when set (by tests), is told the owner of each Call of
	// every batch of more than one that is sent.
	batchHook func(owners []string)

	statsMu sync.Mutex
	stats   Stats
}

// Stats counts what a pool did.
type Stats struct {
	// Started counts worker processes started; Killed those that died or
	// were killed for a limit, by limit.
	Started int
	Killed  map[flows.Limit]int
	// Requests counts round trips (a batch of calls is one).
	Requests int
	// Calls counts Call evaluations; Calls − Requests (with no
	// registrations) is how many rode along in another's round trip.
	Calls int
	// Rerun counts Calls evaluated again alone after the batch they were
	// in failed as a whole.
	Rerun int
}

var _ flows.Scripts = (*Pool)(nil)

// New returns a pool; no worker starts before the first evaluation.
func New(cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Pool{cfg: cfg, slots: owner.NewSlotsWithSpare(cfg.Workers, cfg.Spare), done: make(chan struct{}), all: map[*worker]bool{},
		waiting: map[string][]*waitingCall{}, stats: Stats{Killed: map[flows.Limit]int{}}}, nil
}

// Config returns the pool's configuration with its defaults filled in.
func (p *Pool) Config() Config { return p.cfg }

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() Stats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	s := p.stats
	s.Killed = make(map[flows.Limit]int, len(p.stats.Killed))
	for k, v := range p.stats.Killed {
		s.Killed[k] = v
	}
	return s
}

// Close stops every worker; evaluations in flight fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	if !p.shut {
		close(p.done)
	}
	p.shut = true
	ws := make([]*worker, 0, len(p.all))
	for w := range p.all {
		ws = append(ws, w)
	}
	p.idle = nil
	p.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	return nil
}

// Analyze implements flows.Scripts: the files are loaded and checked in a
// worker; tool and flow lookups are answered from req. A worker killed by
// a limit is the diagnostic E_SCRIPT_LIMIT on the first file.
func (p *Pool) Analyze(ctx context.Context, req flows.AnalyzeRequest) (*flows.Module, flows.Diagnostics, error) {
	wreq := &request{Op: opAnalyze, Files: req.Files, Full: req.Full, NoTools: req.Tools == nil, Lookup: req.Lookup != nil}
	if len(req.Files) > 1 {
		// Parsing is most of a registration of many files, and the
		// files parse independently: on every core this process may use.
		wreq.Procs = runtime.GOMAXPROCS(0)
	}
	var lookupErr error
	running := ""
	if len(req.Files) > 0 {
		running = req.Files[0].Path
	}
	resp, err := p.roundTrip(ctx, wreq, func(path string) { running = path }, func(q *question) *answer {
		switch q.Kind {
		case askTool:
			if t, ok := req.Tools.LookupTool(q.Name); ok {
				return &answer{Tool: &t}
			}
			return &answer{}
		case askToolNames:
			if named, ok := req.Tools.(interface{ Names() []string }); ok {
				return &answer{Names: named.Names()}
			}
			return &answer{}
		case askFlow:
			f, err := req.Lookup(q.Name)
			if err != nil {
				lookupErr = err
				return &answer{Err: err.Error()}
			}
			if f == nil {
				return &answer{}
			}
			b, err := json.Marshal(f)
			if err != nil {
				return &answer{Err: err.Error()}
			}
			return &answer{Flow: b}
		}
		return &answer{Err: fmt.Sprintf("unknown question %q", q.Kind)}
	})
	if lookupErr != nil {
		return nil, nil, lookupErr
	}
	if err == nil && resp.Err != nil {
		err = resp.Err.err()
	}
	if err != nil {
		if flows.LimitOf(err) == "" {
			return nil, nil, err
		}
		// The file whose script was running when the worker died.
		return &flows.Module{}, flows.Diagnostics{{Pos: flows.Pos{File: running}, Code: flows.CodeScriptLimit, Message: err.Error()}}, nil
	}
	var m flows.Module
	if err := json.Unmarshal(resp.Module, &m); err != nil {
		return nil, nil, fmt.Errorf("sandbox: the worker's module: %w", err)
	}
	return &m, resp.Diags, nil
}

// Call implements flows.Scripts: the calls go to one worker in one round
// trip, with the ctx encoded once, and share it with the calls of other
// steps that wait for a worker at the same time (evaluate).
func (p *Pool) Call(ctx context.Context, src flows.Sources, c flows.Context, calls []flows.Call) ([]flows.CallResult, error) {
	wc := &wireCtx{RunID: c.RunID, Attempt: c.Attempt, Results: make(map[string]json.RawMessage, len(c.Results))}
	var err error
	if c.Input != nil {
		if wc.Input, err = asJSON(c.Input); err != nil {
			return nil, fmt.Errorf("ctx.input: %w", err)
		}
	}
	for k, v := range c.Results {
		if wc.Results[k], err = asJSON(v); err != nil {
			return nil, fmt.Errorf("ctx.results[%q]: %w", k, err)
		}
	}
	wreq := &request{Op: opCall, SourceHash: src.Hash, Ctx: wc, Calls: make([]wireCall, len(calls))}
	for i, call := range calls {
		wreq.Calls[i].Ref = call.Ref
		for j, a := range call.Args {
			b, err := json.Marshal(a)
			if err != nil {
				return nil, fmt.Errorf("%s: argument %d: %w", call.Ref, j+2, err)
			}
			wreq.Calls[i].Args = append(wreq.Calls[i].Args, b)
		}
	}
	resp, err := p.evaluate(ctx, wreq, src)
	if err != nil {
		return nil, err
	}
	if resp.Err != nil {
		return nil, resp.Err.err()
	}
	if len(resp.Results) != len(calls) {
		return nil, fmt.Errorf("sandbox: %d results for %d calls", len(resp.Results), len(calls))
	}
	out := make([]flows.CallResult, len(calls))
	for i, r := range resp.Results {
		if r.Err != nil {
			out[i].Err = r.Err.err()
			continue
		}
		if out[i].Value, err = decodeValue(r.Value); err != nil {
			out[i].Err = fmt.Errorf("%s: the worker's value: %w", calls[i].Ref, err)
		}
	}
	return out, nil
}

// ValidateSchema implements flows.Validator: the value is checked in a
// worker, under the pool's deadline and memory limit, so that a costly
// validation is ended at its deadline instead of holding a core of the
// daemon until it finishes.
func (p *Pool) ValidateSchema(ctx context.Context, schema, value json.RawMessage) error {
	resp, err := p.roundTrip(ctx, &request{Op: opValidate, Schema: schema, Value: value}, func(string) {}, func(*question) *answer {
		return &answer{Err: "a validation asks no questions"}
	})
	switch {
	case err != nil:
		return err
	case resp.Err != nil:
		return resp.Err.err()
	case resp.Invalid != "":
		return &flows.InvalidValueError{Msg: resp.Invalid}
	}
	return nil
}

var _ flows.Validator = (*Pool)(nil)

// asJSON encodes v, or passes it on when it is JSON already (the engine
// keeps a run's input and results as it stored them).
func asJSON(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(v)
}

// decodeValue decodes a callable's value as the in-process evaluator
// returns it: whole numbers as int64, others as float64.
func decodeValue(b json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	}
	return v
}

// roundTrip sends req to a worker, answers its questions with ask, tells
// running which file a registration is running (may be nil), and returns
// its final answer. A worker that dies, overruns the deadline or
// breaks the protocol is killed; the error then names the limit it hit
// (a *flows.LimitError) when one did.
func (p *Pool) roundTrip(ctx context.Context, req *request, running func(string), ask func(*question) *answer) (*response, error) {
	w, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	return p.roundTripOn(ctx, w, req, running, ask)
}

// roundTripOn is roundTrip on a worker the caller took; the worker goes
// back to the pool (or is dropped) before it returns.
func (p *Pool) roundTripOn(ctx context.Context, w *worker, req *request, running func(string), ask func(*question) *answer) (*response, error) {
	req.Lang = p.cfg.Lang
	req.CPUSeconds = int64(math.Ceil(p.cfg.Timeout.Seconds()))
	p.count(func(s *Stats) { s.Requests++ })

	deadline := time.Now().Add(p.cfg.Timeout)
	timedOut := make(chan struct{})
	timer := time.AfterFunc(time.Until(deadline), func() {
		close(timedOut)
		w.kill()
	})
	stopWatch := context.AfterFunc(ctx, w.kill)
	overMemory := make(chan struct{})
	stopMemory := w.watchMemory(p.cfg.Memory, overMemory)
	resp, err := w.exchange(req, running, ask, p.cfg.MaxMessageBytes)
	timer.Stop()
	stopWatch()
	stopMemory()
	if err == nil {
		if resp.CPUSeconds > p.cfg.LifetimeCPU.Seconds()/2 {
			p.retire(w) // before the kernel's limit can end it mid-request
		} else {
			p.put(w)
		}
		return resp, nil
	}
	if errors.Is(err, errRequestTooLarge) {
		// Refused before anything was sent: the worker is as it was.
		p.put(w)
		return nil, &flows.LimitError{Limit: flows.LimitSize, Detail: fmt.Sprintf("the ctx and calls (or files) to evaluate take more than the %d bytes a message to the sandbox may", p.cfg.MaxMessageBytes)}
	}
	// A worker that died closed its pipes as it went: let it finish
	// exiting, so that how it ended is its own and not the pool's kill.
	select {
	case <-w.exited:
	case <-time.After(exitGrace):
		w.kill()
	}
	why := w.wait()
	p.drop(w)
	select {
	case <-timedOut:
		why = &flows.LimitError{Limit: flows.LimitTime, Detail: fmt.Sprintf("the evaluation ran past its deadline of %s", p.cfg.Timeout)}
	case <-overMemory:
		why = &flows.LimitError{Limit: flows.LimitMemory, Detail: "the evaluation needed more memory than the sandbox allows"}
	default:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if why == nil && errors.Is(err, errFrameTooLarge) {
		// An answer, or the sources it asked for, over the limit.
		why = &flows.LimitError{Limit: flows.LimitSize, Detail: "a message to or from the sandbox is " + err.Error()}
	}
	if why == nil {
		why = fmt.Errorf("sandbox worker: %w", err)
	}
	if l := flows.LimitOf(why); l != "" {
		p.count(func(s *Stats) { s.Killed[l]++ })
	}
	return nil, why
}

func (p *Pool) count(f func(*Stats)) {
	p.statsMu.Lock()
	f(&p.stats)
	p.statsMu.Unlock()
}

// take returns an idle worker, or starts one when fewer than Workers run,
// once a slot is free for the owner ctx names: an Analyze, a validation
// or a Call evaluated alone waits in its owner's line like a batch.
func (p *Pool) take(ctx context.Context) (*worker, error) {
	if err := ctx.Err(); err != nil { // a free slot would still be given
		return nil, err
	}
	name := owner.From(ctx)
	if err := p.slots.Acquire(ctx, name, p.done); err != nil {
		if errors.Is(err, owner.ErrStopped) {
			return nil, ErrClosed
		}
		return nil, err
	}
	return p.takeHeld(name)
}

// takeHeld is take for a caller that already holds a slot for name; on
// error the slot is freed.
func (p *Pool) takeHeld(name string) (*worker, error) {
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		p.slots.Release(name)
		return nil, ErrClosed
	}
	for n := len(p.idle); n > 0; n = len(p.idle) {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		if !w.dead() {
			w.holder = name
			p.mu.Unlock()
			return w, nil
		}
		delete(p.all, w) // died while idle: not this request's doing
	}
	p.mu.Unlock()
	w, err := p.start()
	if err != nil {
		p.slots.Release(name)
		return nil, err
	}
	w.holder = name
	p.mu.Lock()
	p.all[w] = true
	shut := p.shut
	p.mu.Unlock()
	if shut {
		p.drop(w)
		w.stop()
		return nil, ErrClosed
	}
	return w, nil
}

func (p *Pool) put(w *worker) {
	holder := w.holder // read before another request can take w
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		w.stop()
	} else {
		p.idle = append(p.idle, w)
		p.mu.Unlock()
	}
	p.slots.Release(holder)
}

func (p *Pool) retire(w *worker) {
	p.drop(w)
	w.stop()
}

// drop forgets a worker that is dead or being stopped and frees its slot.
func (p *Pool) drop(w *worker) {
	p.mu.Lock()
	delete(p.all, w)
	p.mu.Unlock()
	p.slots.Release(w.holder)
}

// start launches a worker and puts its limits on it before it is sent
// anything.
func (p *Pool) start() (*worker, error) {
	cmd := exec.Command(p.cfg.Command[0], p.cfg.Command[1:]...)
	// The Go runtime collects harder as the heap nears the cap, so an
	// evaluation that fits is not killed for garbage it left.
	// Nothing of the parent's environment (plugins' API keys among it).
	cmd.Env = []string{EnvWorker + "=1", "GOMEMLIMIT=" + strconv.FormatInt(p.cfg.Memory/4*3, 10), "GOMAXPROCS=1", "GOTRACEBACK=single"}
	proclimit.DieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Blocking pipes: a round trip then costs a read and a write, not a
	// trip through the poller each way. A read still ends when the worker
	// dies (end of file), which is how a kill interrupts it.
	for _, f := range []any{stdin, stdout} {
		if f, ok := f.(interface{ Fd() uintptr }); ok { // the *os.File of each end
			f.Fd()
		}
	}
	w := &worker{cmd: cmd, in: bufio.NewWriterSize(stdin, 64<<10), closeIn: stdin, out: bufio.NewReaderSize(stdout, 64<<10),
		stderr: &headBuffer{max: stderrHead}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: starting a worker: %w", err)
	}
	go func() {
		w.waitErr = cmd.Wait()
		close(w.exited)
	}()
	pid := cmd.Process.Pid
	if statm := fmt.Sprintf("/proc/%d/statm", pid); fileExists(statm) {
		w.statm = statm
	}
	if proclimit.Supported {
		err := proclimit.SetCPUMax(pid, int64(math.Ceil(p.cfg.LifetimeCPU.Seconds())))
		if err == nil && !p.cfg.noMemoryCap {
			err = proclimit.SetMemoryMax(pid, p.cfg.Memory)
		}
		if err != nil {
			w.kill()
			<-w.exited
			return nil, fmt.Errorf("sandbox: limiting a worker: %w", err)
		}
	}
	p.count(func(s *Stats) { s.Started++ })
	return w, nil
}

// worker is one worker process and its pipes.
type worker struct {
	cmd     *exec.Cmd
	in      *bufio.Writer
	closeIn io.Closer
	out     *bufio.Reader
	stderr  *headBuffer
	exited  chan struct{}
	waitErr error
	statm   string // /proc/PID/statm, where there is one
	// holder is the owner whose slot the worker's request holds.
	holder string

	killMu sync.Mutex
	killed bool
}

// exchange sends req, answers questions, and returns the final answer.
func (w *worker) exchange(req *request, running func(string), ask func(*question) *answer, limit int) (*response, error) {
	if err := writeFrame(w.in, req, limit); err != nil {
		if errors.Is(err, errFrameTooLarge) {
			return nil, fmt.Errorf("%w: %w", errRequestTooLarge, err)
		}
		return nil, err
	}
	for {
		var resp response
		if err := readFrame(w.out, &resp, limit); err != nil {
			return nil, err
		}
		if resp.Running != "" {
			if running != nil {
				running(resp.Running)
			}
			continue
		}
		if resp.Ask == nil {
			return &resp, nil
		}
		if err := writeFrame(w.in, &request{Answer: ask(resp.Ask)}, limit); err != nil {
			return nil, err
		}
	}
}

// memoryPoll is how often the resident memory of a worker with a request
// in flight is read. RLIMIT_DATA alone does not bound a Go worker: the
// kernel lets a mapping replace reserved address space without counting
// it against the limit, so one huge allocation can go through and be
// filled. At the rate memory can be written, a worker is killed within a
// few tens of MiB past its cap.
const memoryPoll = 10 * time.Millisecond

// watchMemory kills the worker and closes over when its resident memory
// exceeds limit, until the returned stop is called. It reads /proc (Linux
// only) every memoryPoll, starting one poll after the request: most
// requests end before anything is read.
func (w *worker) watchMemory(limit int64, over chan struct{}) (stop func()) {
	if w.statm == "" {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // t is set before the first poll can use it
	defer mu.Unlock()
	t = time.AfterFunc(memoryPoll, func() {
		b, err := os.ReadFile(w.statm)
		var size, resident int64
		if err == nil {
			_, err = fmt.Sscan(string(b), &size, &resident)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stopped || err != nil:
		case resident*pageSize > limit:
			close(over)
			w.kill()
		default:
			t.Reset(memoryPoll)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

var pageSize = int64(os.Getpagesize())

func (w *worker) kill() {
	w.killMu.Lock()
	w.killed = true
	w.killMu.Unlock()
	_ = w.cmd.Process.Kill()
}

func (w *worker) dead() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// stop ends an idle worker: closing its stdin ends its loop; a worker
// that does not go is killed.
func (w *worker) stop() {
	_ = w.closeIn.Close()
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		w.kill()
		<-w.exited
	}
}

// wait waits for a killed or dead worker to exit and says which limit
// ended it, from how it ended and what it last wrote: nil when it was
// killed by the pool or ended for no reason a limit explains.
func (w *worker) wait() error {
	<-w.exited
	head := w.stderr.String()
	var ee *exec.ExitError
	if !errors.As(w.waitErr, &ee) {
		return nil
	}
	ws, _ := ee.Sys().(syscall.WaitStatus)
	switch {
	case strings.Contains(head, "stack overflow") || strings.Contains(head, "stack exceeds"):
		return &flows.LimitError{Limit: flows.LimitDepth, Detail: fmt.Sprintf("the evaluation recursed past the sandbox's stack of %d MiB", WorkerStack>>20)}
	case strings.Contains(head, "out of memory") || strings.Contains(head, "cannot allocate memory") || runtimeSignal(head):
		return &flows.LimitError{Limit: flows.LimitMemory, Detail: "the evaluation needed more memory than the sandbox allows"}
	case ws.Signaled() && ws.Signal() == syscall.SIGXCPU:
		return &flows.LimitError{Limit: flows.LimitTime, Detail: "the evaluation used up its CPU time"}
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		w.killMu.Lock()
		byPool := w.killed
		w.killMu.Unlock()
		if !byPool { // the kernel's OOM killer
			return &flows.LimitError{Limit: flows.LimitMemory, Detail: "the sandbox worker was killed for its memory"}
		}
	}
	if line := fatalLine(head); line != "" {
		return fmt.Errorf("sandbox worker died: %s", line)
	}
	return nil
}

// runtimeSignal says a worker died of a signal its Go runtime could not
// turn into a panic: a fault outside Go code, or inside the runtime
// itself. A worker runs only Go, so that is the runtime refused memory by
// the worker's RLIMIT_DATA where it cannot say so (a new thread's stack, a
// span it needed), not the evaluation's fault: a nil dereference in Go
// code is a "panic:" instead.
func runtimeSignal(head string) bool {
	return strings.HasPrefix(strings.TrimSpace(head), "SIGSEGV: segmentation violation") ||
		strings.Contains(head, "fatal error: unexpected signal during runtime execution")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// fatalLine is the line of a worker's stderr that says why it died.
func fatalLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") {
			return l
		}
	}
	return lines[0]
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
