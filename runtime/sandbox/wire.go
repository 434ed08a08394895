package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/weirhq/weir/flows"
)

// The protocol: length-prefixed JSON frames. The pool sends a request; the
// worker answers with questions (a tool, a registered flow, sources it
// lacks), each answered by the pool, then with one final answer.

// request is what the pool sends: a new evaluation, or the answer to the
// worker's last question.
type request struct {
	Op   string `json:"op,omitempty"` // opAnalyze, opCall, opBatch, opValidate; "" for an answer
	Lang string `json:"lang,omitempty"`

	// analyze
	Files   []flows.File `json:"files,omitempty"`
	Full    bool         `json:"full,omitempty"`
	NoTools bool         `json:"no_tools,omitempty"` // the catalog is nil
	Lookup  bool         `json:"lookup,omitempty"`   // flows may be looked up
	// Procs is how many threads the worker may compile the files on
	// (the worker otherwise runs on one).
	Procs int `json:"procs,omitempty"`

	// call
	SourceHash string     `json:"source_hash,omitempty"`
	Ctx        *wireCtx   `json:"ctx,omitempty"`
	Calls      []wireCall `json:"calls,omitempty"`
	CPUSeconds int64      `json:"cpu_seconds,omitempty"` // this request's CPU allowance

	// batch: calls of several steps, each with its own sources and ctx,
	// answered in order in one response.
	Batch []request `json:"batch,omitempty"`

	// validate: a value checked against a user's schema.
	Schema json.RawMessage `json:"schema,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`

	Answer *answer `json:"answer,omitempty"`
}

const (
	opAnalyze  = "analyze"
	opCall     = "call"
	opBatch    = "batch"
	opValidate = "validate"
)

type wireCtx struct {
	RunID   string                     `json:"run_id"`
	Attempt int                        `json:"attempt"`
	Input   json.RawMessage            `json:"input,omitempty"`
	Results map[string]json.RawMessage `json:"results,omitempty"`
}

type wireCall struct {
	Ref  flows.CallableRef `json:"ref"`
	Args []json.RawMessage `json:"args,omitempty"`
}

// question is what a worker asks in the middle of an evaluation.
type question struct {
	Kind string `json:"kind"` // askTool, askToolNames, askFlow, askSources
	Name string `json:"name,omitempty"`
}

const (
	askTool      = "tool"
	askToolNames = "tool_names"
	askFlow      = "flow"
	askSources   = "sources"
)

type answer struct {
	Tool    *flows.ToolInfo `json:"tool,omitempty"`
	Names   []string        `json:"names,omitempty"`
	Flow    json.RawMessage `json:"flow,omitempty"` // IR; empty: no such flow
	Sources []flows.File    `json:"sources,omitempty"`
	Err     string          `json:"err,omitempty"`
}

// response is what a worker sends: a question, or the final answer.
type response struct {
	Ask *question `json:"ask,omitempty"`
	// Running names the file whose script a registration runs now; no
	// answer is expected.
	Running string `json:"running,omitempty"`

	// analyze
	Module json.RawMessage   `json:"module,omitempty"`
	Diags  flows.Diagnostics `json:"diags,omitempty"`
	// call
	Results []wireResult `json:"results,omitempty"`
	// batch: one answer per request of the batch, in order.
	Batch []response `json:"batch,omitempty"`
	// validate: why the schema refused the value ("" if it accepted it).
	Invalid string `json:"invalid,omitempty"`
	// Err is a failure of the whole evaluation.
	Err *wireErr `json:"err,omitempty"`
	// CPUSeconds is the worker's CPU time so far.
	CPUSeconds float64 `json:"cpu_seconds"`
}

type wireResult struct {
	Value json.RawMessage `json:"value,omitempty"`
	Err   *wireErr        `json:"err,omitempty"`
}

// wireErr carries a *flows.CallError, a *flows.LimitError or any other
// error's message across the pipe.
type wireErr struct {
	Msg       string            `json:"msg"`
	Call      bool              `json:"call,omitempty"`
	Ref       flows.CallableRef `json:"ref,omitzero"`
	Pos       flows.Pos         `json:"pos,omitzero"`
	Backtrace string            `json:"backtrace,omitempty"`
	Limit     flows.Limit       `json:"limit,omitempty"`
}

func toWireErr(err error) *wireErr {
	if err == nil {
		return nil
	}
	var ce *flows.CallError
	if errors.As(err, &ce) {
		return &wireErr{Msg: ce.Msg, Call: true, Ref: ce.Ref, Pos: ce.Pos, Backtrace: ce.Backtrace, Limit: ce.Limit}
	}
	var le *flows.LimitError
	if errors.As(err, &le) {
		return &wireErr{Msg: le.Detail, Limit: le.Limit}
	}
	return &wireErr{Msg: err.Error()}
}

func (w *wireErr) err() error {
	switch {
	case w == nil:
		return nil
	case w.Call:
		return &flows.CallError{Ref: w.Ref, Pos: w.Pos, Msg: w.Msg, Backtrace: w.Backtrace, Limit: w.Limit}
	case w.Limit != "":
		return &flows.LimitError{Limit: w.Limit, Detail: w.Msg}
	}
	return errors.New(w.Msg)
}

// errFrameTooLarge is a frame over the size limit; the stream is not
// read further.
var errFrameTooLarge = errors.New("frame larger than the limit")

func writeFrame(w *bufio.Writer, v any, limit int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeEncoded(w, b, limit)
}

// writeEncoded writes a frame whose JSON is already encoded.
func writeEncoded(w *bufio.Writer, b []byte, limit int) error {
	if len(b) > limit {
		return fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, len(b), limit)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

func readFrame(r *bufio.Reader, v any, limit int) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := int(binary.BigEndian.Uint32(n[:]))
	if size > limit {
		return fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, size, limit)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
