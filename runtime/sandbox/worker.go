package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/internal/proclimit"
)

// EnvWorker, set to "1" in a process's environment, makes ServeIfWorker
// serve the sandbox protocol on stdin and stdout instead of returning.
const EnvWorker = "WEIR_SANDBOX_WORKER"

// LangStarlark is the language name of flow scripts written in Starlark.
const LangStarlark = "starlark"

// WorkerStack bounds a worker's goroutine stacks: deep recursion ends as
// a stack overflow (LimitDepth) long before it could fill the memory cap.
const WorkerStack = 64 << 20

// workerEvaluatorBytes bounds a worker's evaluator cache (see
// script.Cache); it leaves most of DefaultMemory to the evaluations.
const workerEvaluatorBytes = 64 << 20

// Languages are the flow languages a worker evaluates, by the name a
// request gives. Each is built once per worker.
var Languages = map[string]func() flows.Scripts{
	LangStarlark: func() flows.Scripts {
		return script.Local{Cache: script.NewCache(workerEvaluatorBytes, script.Loader{})}
	},
}

// ServeIfWorker serves the sandbox protocol on stdin and stdout and exits
// when EnvWorker is set; otherwise it returns at once. Call it first thing
// in main and in TestMain: nothing of the binary's own (flags, config,
// store) runs in a worker.
func ServeIfWorker() {
	if os.Getenv(EnvWorker) != "1" {
		return
	}
	debug.SetMaxStack(WorkerStack)
	if err := serve(os.Stdin, os.Stdout); !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serve answers requests until the pool closes the pipe (io.EOF) or the
// pipe fails.
func serve(in io.Reader, out io.Writer) error {
	w := &workerConn{r: bufio.NewReaderSize(in, 64<<10), w: bufio.NewWriterSize(out, 64<<10), langs: map[string]flows.Scripts{}}
	for {
		var req request
		if err := readFrame(w.r, &req, MaxMessageBytes); err != nil {
			return err
		}
		used := cpuSeconds()
		if req.CPUSeconds > 0 {
			// This request's allowance on top of what the worker has
			// used; the pool sets the lifetime hard limit. The soft
			// limit changes once per CPU second used, not per request.
			if soft := int64(math.Ceil(used)) + req.CPUSeconds; soft != w.cpuSoft {
				if err := proclimit.LimitOwnCPU(soft); err != nil && proclimit.Supported {
					return err
				}
				w.cpuSoft = soft
			}
		}
		resp := w.handle(&req)
		resp.CPUSeconds = used // as of the request's start: enough to retire a worker
		if err := writeFrame(w.w, resp, MaxMessageBytes); err != nil {
			if !errors.Is(err, errFrameTooLarge) {
				return err
			}
			tooLarge := &response{Err: toWireErr(&flows.LimitError{Limit: flows.LimitSize, Detail: "the answer is " + err.Error()}), CPUSeconds: resp.CPUSeconds}
			if err := writeFrame(w.w, tooLarge, MaxMessageBytes); err != nil {
				return err
			}
		}
	}
}

// workerConn is a worker's end of the pipe and its languages.
type workerConn struct {
	r       *bufio.Reader
	w       *bufio.Writer
	langs   map[string]flows.Scripts
	cpuSoft int64 // the soft RLIMIT_CPU last set
}

func (w *workerConn) handle(req *request) (resp *response) {
	defer func() {
		// A fault in an evaluation fails that evaluation; the worker
		// stays usable.
		if r := recover(); r != nil {
			resp = &response{Err: &wireErr{Msg: fmt.Sprintf("the evaluation panicked: %v", r)}}
		}
	}()
	if req.Op == opValidate {
		return validate(req)
	}
	s, ok := w.langs[req.Lang]
	if !ok {
		mk, known := Languages[req.Lang]
		if !known {
			return &response{Err: &wireErr{Msg: fmt.Sprintf("no flow language %q in this worker", req.Lang)}}
		}
		s = mk()
		w.langs[req.Lang] = s
	}
	ctx := context.Background()
	switch req.Op {
	case opBatch:
		// Each request of the batch is evaluated as if it came alone; a
		// fault in one fails that one.
		out := make([]response, len(req.Batch))
		for i := range req.Batch {
			if sub := &req.Batch[i]; sub.Op == opCall {
				sub.Lang = req.Lang
				out[i] = *w.handle(sub)
			} else {
				out[i] = response{Err: &wireErr{Msg: fmt.Sprintf("operation %q in a batch", sub.Op)}}
			}
		}
		return &response{Batch: out}
	case opAnalyze:
		return w.analyze(ctx, s, req)
	case opCall:
		return w.call(ctx, s, req)
	}
	return &response{Err: &wireErr{Msg: fmt.Sprintf("unknown operation %q", req.Op)}}
}

// ask sends a question to the pool and waits for its answer.
func (w *workerConn) ask(q question) (*answer, error) {
	if err := writeFrame(w.w, &response{Ask: &q}, MaxMessageBytes); err != nil {
		return nil, err
	}
	var req request
	if err := readFrame(w.r, &req, MaxMessageBytes); err != nil {
		return nil, err
	}
	if req.Answer == nil {
		return nil, fmt.Errorf("the pool sent no answer to %s %q", q.Kind, q.Name)
	}
	if req.Answer.Err != "" {
		return nil, errors.New(req.Answer.Err)
	}
	return req.Answer, nil
}

func (w *workerConn) analyze(ctx context.Context, s flows.Scripts, req *request) *response {
	if req.Procs > 1 {
		// A worker runs on one thread (one evaluation at a time), but
		// the files of one registration compile in parallel (flows'
		// compileAll); the scripts still run one after another. The
		// request's CPU allowance counts every thread.
		prev := runtime.GOMAXPROCS(min(req.Procs, runtime.NumCPU()))
		defer runtime.GOMAXPROCS(prev)
	}
	ar := flows.AnalyzeRequest{Files: req.Files, Full: req.Full, OnRun: func(path string) {
		if len(req.Files) > 1 { // with one file, the pool knows which
			_ = writeFrame(w.w, &response{Running: path}, MaxMessageBytes)
		}
	}}
	if !req.NoTools {
		ar.Tools = &askCatalog{w: w, known: map[string]*flows.ToolInfo{}}
	}
	if req.Lookup {
		ar.Lookup = func(name string) (*flows.Flow, error) {
			a, err := w.ask(question{Kind: askFlow, Name: name})
			if err != nil || len(a.Flow) == 0 {
				return nil, err
			}
			var f flows.Flow
			if err := json.Unmarshal(a.Flow, &f); err != nil {
				return nil, err
			}
			return &f, nil
		}
	}
	m, ds, err := s.Analyze(ctx, ar)
	if err != nil {
		return &response{Err: toWireErr(err)}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return &response{Err: toWireErr(err)}
	}
	return &response{Module: b, Diags: ds}
}

// askCatalog resolves tools by asking the pool, once per name.
type askCatalog struct {
	w     *workerConn
	known map[string]*flows.ToolInfo
	names []string
	asked bool
}

func (c *askCatalog) LookupTool(name string) (flows.ToolInfo, bool) {
	t, ok := c.known[name]
	if !ok {
		a, err := c.w.ask(question{Kind: askTool, Name: name})
		if err == nil {
			t = a.Tool
		}
		c.known[name] = t
	}
	if t == nil {
		return flows.ToolInfo{}, false
	}
	return *t, true
}

func (c *askCatalog) Names() []string {
	if !c.asked {
		c.asked = true
		if a, err := c.w.ask(question{Kind: askToolNames}); err == nil {
			c.names = a.Names
		}
	}
	return c.names
}

func (w *workerConn) call(ctx context.Context, s flows.Scripts, req *request) *response {
	c := flows.Context{}
	if req.Ctx != nil {
		c.RunID, c.Attempt = req.Ctx.RunID, req.Ctx.Attempt
		if len(req.Ctx.Input) > 0 {
			c.Input = req.Ctx.Input
		}
		c.Results = make(map[string]any, len(req.Ctx.Results))
		for k, v := range req.Ctx.Results {
			c.Results[k] = v
		}
	}
	calls := make([]flows.Call, len(req.Calls))
	for i, wc := range req.Calls {
		calls[i].Ref = wc.Ref
		for _, a := range wc.Args {
			calls[i].Args = append(calls[i].Args, a)
		}
	}
	src := flows.Sources{Hash: req.SourceHash, Load: func(context.Context) ([]flows.File, error) {
		a, err := w.ask(question{Kind: askSources, Name: req.SourceHash})
		if err != nil {
			return nil, err
		}
		return a.Sources, nil
	}}
	results, err := s.Call(ctx, src, c, calls)
	if err != nil {
		return &response{Err: toWireErr(err)}
	}
	out := make([]wireResult, len(results))
	for i, r := range results {
		if r.Err != nil {
			out[i].Err = toWireErr(r.Err)
			continue
		}
		b, err := json.Marshal(r.Value)
		if err != nil {
			out[i].Err = toWireErr(err)
			continue
		}
		out[i].Value = b
	}
	return &response{Results: out}
}

// cpuSeconds is this process's CPU time (user and system) so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// validate checks a value against a user's schema, in this worker under
// the request's deadline (flows.Validator).
func validate(req *request) *response {
	err := flows.ValidateJSON(req.Schema, req.Value)
	var iv *flows.InvalidValueError
	if errors.As(err, &iv) {
		return &response{Invalid: iv.Msg}
	}
	return &response{Err: toWireErr(err)}
}
