package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/dedupe"
)

// gauge counts calls in flight and remembers the most seen at once.
type gauge struct {
	now, peak atomic.Int64
}

func (g *gauge) enter() int64 {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return n
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// boundedTimeout is testkit.bounded's declared default timeout.
const boundedTimeout = 500 * time.Millisecond

var (
	sleeping  gauge
	exclusive gauge
	failMu    sync.Mutex
)

func tools() []sdk.Tool {
	return []sdk.Tool{
		{
			Name:        "testkit.echo",
			Description: "Return the input unchanged.",
			Effect:      sdk.EffectRead,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				return call.Input, nil
			},
		},
		{
			Name:        "testkit.sleep",
			Description: "Sleep ms milliseconds, reporting progress; return early with an error when cancelled, and record the cancellation in cancelled.jsonl.",
			Idempotent:  true,
			InputSchema: `{"type":"object","required":["ms"],"properties":{"ms":{"type":"integer","minimum":0}},"additionalProperties":false}`,
			Run:         runSleep,
		},
		{
			Name:        "testkit.hang",
			Description: "Sleep ms milliseconds ignoring cancellation, like a plugin stuck in a system call.",
			Idempotent:  true,
			InputSchema: `{"type":"object","required":["ms"],"properties":{"ms":{"type":"integer","minimum":0}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct{ MS int64 }
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				time.Sleep(time.Duration(in.MS) * time.Millisecond)
				return map[string]any{"slept_ms": in.MS}, nil
			},
		},
		{
			Name:        "testkit.fail",
			Description: "Fail with a retryable error on the first `times` attempts of a logical call (counted by idempotency key in the state directory, so a restart does not reset it), then succeed. The error carries `code` and a retry-after of `retry_after_ms` when given.",
			Idempotent:  true,
			InputSchema: `{"type":"object","required":["times"],"properties":{"times":{"type":"integer","minimum":0},"code":{"type":"string"},"retry_after_ms":{"type":"integer","minimum":0}}}`,
			Run:         runFail,
		},
		{
			Name:        "testkit.crash",
			Description: "Exit the plugin process in the middle of the call.",
			Idempotent:  true,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				os.Exit(3)
				return nil, nil
			},
		},
		{
			Name:        "testkit.flood",
			Description: "Answer a JSON string of `bytes` bytes, sending it first as partial results of `piece` bytes each when piece is given (the last piece may be shorter).",
			Idempotent:  true,
			InputSchema: `{"type":"object","required":["bytes"],"properties":{"bytes":{"type":"integer","minimum":0},"piece":{"type":"integer","minimum":1}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct{ Bytes, Piece int }
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				out := strings.Repeat("x", in.Bytes)
				for rest := out; in.Piece > 0 && rest != ""; {
					n := min(in.Piece, len(rest))
					call.Partial(rest[:n])
					rest = rest[n:]
				}
				return out, nil
			},
		},
		{
			Name:        "testkit.exclusive",
			Effect:      sdk.EffectAtMostOnce,
			Description: "Not idempotent: sleep ms milliseconds and answer the most calls of this tool ever seen in flight at once (1 if weir serializes it).",
			InputSchema: `{"type":"object","properties":{"ms":{"type":"integer","minimum":0}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				exclusive.enter()
				defer exclusive.leave()
				var in struct{ MS int64 }
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				time.Sleep(time.Duration(in.MS) * time.Millisecond)
				return map[string]any{"peak": exclusive.peak.Load()}, nil
			},
		},
		onceTool,
		{
			Name:        "testkit.cost",
			Description: "Report the actual cost given in the input (declared cost 5).",
			Idempotent:  true,
			Cost:        5,
			InputSchema: `{"type":"object","required":["cost"],"properties":{"cost":{"type":"integer","minimum":0}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct{ Cost int64 }
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				return sdk.Result{Output: map[string]any{"cost": in.Cost}, Cost: in.Cost}, nil
			},
		},
		{
			Name:        "testkit.env",
			Description: "Answer what the plugin was launched with: its name, state directory, configuration and the environment variables named in vars (set ones only); and the call's traceparent and tracestate.",
			Idempotent:  true,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct{ Vars []string }
				_ = call.Decode(&in) // any input: vars is optional
				vars := map[string]string{}
				for _, k := range in.Vars {
					if v, ok := os.LookupEnv(k); ok {
						vars[k] = v
					}
				}
				return map[string]any{
					"name":        os.Getenv("WEIR_PLUGIN_NAME"),
					"state_dir":   call.StateDir,
					"config":      call.Config,
					"pid":         os.Getpid(),
					"vars":        vars,
					"traceparent": call.TraceParent,
					"tracestate":  call.TraceState,
				}, nil
			},
		},
		{
			Name:        "testkit.spew",
			Description: "Print the bytes stdout_hex encodes and a newline on stdout, then a line of stderr_bytes x's on stderr: output that is not text, or is one endless line.",
			Idempotent:  true,
			InputSchema: `{"type":"object","properties":{"stdout_hex":{"type":"string"},"stderr_bytes":{"type":"integer","minimum":0}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct {
					StdoutHex   string `json:"stdout_hex"`
					StderrBytes int    `json:"stderr_bytes"`
				}
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				raw, err := hex.DecodeString(in.StdoutHex)
				if err != nil {
					return nil, err // a plain error is permanent
				}
				os.Stdout.Write(append(raw, '\n'))
				if in.StderrBytes > 0 {
					line := make([]byte, in.StderrBytes+1)
					for i := range in.StderrBytes {
						line[i] = 'x'
					}
					line[in.StderrBytes] = '\n'
					os.Stderr.Write(line)
				}
				return map[string]any{"stdout_bytes": len(raw), "stderr_bytes": in.StderrBytes}, nil
			},
		},
		{
			Name:        "testkit.bounded",
			Description: "Declare a default timeout of 500ms (protocol revision 2) and wait for the call's end; answer the deadline weir gave, in ms from the call's start, if wait is false.",
			Idempotent:  true,
			Timeout:     boundedTimeout,
			InputSchema: `{"type":"object","properties":{"wait":{"type":"boolean"}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct{ Wait bool }
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				if !in.Wait {
					return map[string]any{"deadline_ms": time.Until(call.Deadline).Milliseconds()}, nil
				}
				<-ctx.Done()
				return nil, ctx.Err()
			},
		},
		{
			Name:        "testkit.log",
			Description: "Log message through the plugin's logger and print it on stderr.",
			Idempotent:  true,
			InputSchema: `{"type":"object","required":["message"],"properties":{"message":{"type":"string"}}}`,
			Run: func(ctx context.Context, call *sdk.Call) (any, error) {
				var in struct{ Message string }
				if err := call.Decode(&in); err != nil {
					return nil, err
				}
				call.Logger().Warn(in.Message, "key", call.IdempotencyKey)
				fmt.Fprintln(os.Stderr, "stderr: "+in.Message)
				return map[string]any{"logged": in.Message}, nil
			},
		},
	}
}

func runSleep(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct{ MS int64 }
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	sleeping.enter()
	defer sleeping.leave()
	total := time.Duration(in.MS) * time.Millisecond
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timer := time.NewTimer(total)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			call.Progress(in.MS, in.MS)
			return map[string]any{"slept_ms": in.MS, "peak": sleeping.peak.Load()}, nil
		case <-tick.C:
			// Never past the total: a loaded machine may tick after the
			// timer is due, and progress must not run backwards.
			call.Progress(min(time.Since(start).Milliseconds(), in.MS), in.MS)
		case <-ctx.Done():
			rec, _ := json.Marshal(map[string]any{
				"idempotency_key": call.IdempotencyKey,
				"after_ms":        time.Since(start).Milliseconds(),
				"reason":          ctx.Err().Error(),
			})
			if call.StateDir != "" {
				if f, err := os.OpenFile(filepath.Join(call.StateDir, "cancelled.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
					_, _ = f.Write(append(rec, '\n'))
					_ = f.Close()
				}
			}
			return nil, ctx.Err()
		}
	}
}

func runFail(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct {
		Times        int64  `json:"times"`
		Code         string `json:"code"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	}
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	if call.IdempotencyKey == "" {
		return nil, errors.New("testkit.fail counts attempts by idempotency key, and the call has none")
	}
	if call.StateDir == "" {
		return nil, errors.New("testkit.fail needs a state directory")
	}
	failMu.Lock()
	defer failMu.Unlock()
	sum := sha256.Sum256([]byte(call.IdempotencyKey))
	dir := filepath.Join(call.StateDir, "fail")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, hex.EncodeToString(sum[:]))
	var n int64
	if b, err := os.ReadFile(path); err == nil {
		n, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	n++
	if err := dedupe.WriteFileAtomic(path, []byte(strconv.FormatInt(n, 10)), 0o600); err != nil {
		return nil, err
	}
	if n <= in.Times {
		err := sdk.Retryable(fmt.Errorf("attempt %d of %d planned failures", n, in.Times))
		if in.Code != "" {
			err = sdk.WithCode(err, in.Code)
		}
		if in.RetryAfterMS > 0 {
			err = sdk.RetryAfter(err, time.Duration(in.RetryAfterMS)*time.Millisecond)
		}
		return nil, err
	}
	return map[string]any{"attempts": n}, nil
}
