package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	ownerctx "github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
)

// MaxRequestIDBytes bounds a request id, which becomes part of a store
// key: at most this many bytes of printable UTF-8.
const MaxRequestIDBytes = requestid.MaxBytes

// MaxIDBytes bounds the other ids a caller names that become parts of
// store keys or are echoed to operators: run ids, node names, wait ids.
const MaxIDBytes = 256

// CheckRequestID refuses, with E_BAD_REQUEST_ID, a request id a user may
// not send: longer than MaxRequestIDBytes, not printable UTF-8, holding
// U+FFFD (what a decoder made of invalid UTF-8 or a lone surrogate, so
// that two ids would collide), or starting with a prefix reserved for
// runs the daemon starts itself ("" means no dedup and passes).
func CheckRequestID(id string) error {
	if err := requestid.Check(id); err != nil {
		return protocolErr(CodeBadRequestID, "%v", err)
	}
	return nil
}

// CheckPrintable refuses s if it is longer than max bytes or is not
// printable UTF-8 (no control characters: NUL would split a store key,
// escapes would reach operators' terminals). what names s in the error,
// which quotes only a short prefix of it.
func CheckPrintable(what, s string, max int) error {
	if len(s) > max {
		return protocolErr(CodeBadRequest, "%s of %d bytes: at most %d bytes are allowed", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return protocolErr(CodeBadRequest, "%s is not valid UTF-8", what)
	}
	for i, r := range s {
		if !unicode.IsPrint(r) {
			return protocolErr(CodeBadRequest, "%s holds the control character %U at byte %d: only printable UTF-8 is allowed", what, r, i)
		}
	}
	return nil
}

// StartRequest asks for a run. Owner is the authenticated caller, never
// something the client chose.
type StartRequest struct {
	Owner     string
	Flow      string
	Input     json.RawMessage
	RequestID string // the client's business id; "" means no dedup
	// TraceParent is the caller's W3C traceparent, well formed (the API
	// drops a malformed one, as the W3C spec says): journaled in the
	// accepted event, it makes the caller's trace the run's
	// (runtime/telemetry). "" means the run has a trace of its own.
	TraceParent string
	// TraceState is the caller's W3C tracestate, well formed, kept only
	// beside a TraceParent: journaled with it, carried by the run's spans
	// and passed on with its calls.
	TraceState string
	// startedBy names what started a run the daemon starts itself
	// (store.Run.StartedBy); its RequestID is derived, under a prefix
	// users may not send.
	startedBy string
}

// StartResult answers an accepted (or deduplicated) start.
type StartResult struct {
	RunID string `json:"run_id"`
	// Existing is true when the request id matched an earlier run with the
	// same input: that run is returned and nothing new was accepted.
	Existing bool `json:"existing"`
}

// Submit accepts a run journal-first (docs/design.md §5): protocol and identity →
// dedup → reserve capacity → durable acceptance record → publish → answer.
// It never answers "accepted" for something not durably written.
func (e *Engine) Submit(ctx context.Context, req StartRequest) (*StartResult, error) {
	res, err := e.submit(ctx, req)
	var ee *Error
	if errors.As(err, &ee) && ee.Class == ClassStorage && ee.Code == CodeStorage {
		// Closing takes the gate exclusively: only after submit let go.
		e.admission.close(CodeStorage, ee.Message)
		e.log.Error("storage fault", "incident", ee.Incident, "error", ee.cause)
		ee.Message = "admission is closed until an operator acts: " + ee.Message
	}
	return res, err
}

// submit is Submit under the gate, shared with other acceptances and
// exclusive of closing admission.
//
// What only reads — the request's checks, a re-send's answer, the flow
// and the validation of the input against its schema — runs before the
// gate: validating a user's input against a user's schema may be slow,
// and closing admission (a drain, a storage failure) must never wait for
// it.
func (e *Engine) submit(ctx context.Context, req StartRequest) (*StartResult, error) {
	// Validating the input may take the owner's share of the sandbox.
	ctx = ownerctx.WithOwner(ctx, req.Owner)
	cs, answer, err := checkStart(ctx, e.st, e.book, req)
	if cs == nil {
		return answer, err
	}

	entry := cs.fe.flow.Entry
	run, existing, err := admitStart(ctx, e, req.Owner, func(runID string, cfg *Config) (*store.Run, *store.Task) {
		run := cs.newRun(runID, cfg, e.clock.Now())
		run.TraceID = telemetry.TraceOf(runID, req.TraceParent).String()
		if req.TraceParent != "" {
			run.TraceState = req.TraceState
		}
		return run, newStepTask(run, entry, run.CreatedAt)
	}, func(tx store.Tx, run *store.Run, task *store.Task) (*store.Dedup, error) {
		return e.journal.acceptTx(tx, run, task, entry, req.TraceParent, run.TraceState)
	})
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return dedupAnswer(ctx, e.st, existing, req.Flow, cs.inputHash)
	}
	return &StartResult{RunID: run.ID}, nil
}

// admitStart is the admission every start passes, a client's and a
// fork's alike: the gate, the disk, the owner's quotas and budget, and a
// place in the queue (the engine's and the owner's share of it). build
// makes the run and its first task once the run's id is known; write
// writes them in one durable transaction, or returns the dedup record of
// an earlier start with the same request id, and then nothing was
// written and that record is returned.
func admitStart(ctx context.Context, e *Engine, owner string,
	build func(runID string, cfg *Config) (*store.Run, *store.Task),
	write func(tx store.Tx, run *store.Run, task *store.Task) (*store.Dedup, error)) (*store.Run, *store.Dedup, error) {
	if err := e.admission.enter(); err != nil {
		return nil, nil, err
	}
	defer e.admission.leave()
	if err := e.admission.checkDisk(); err != nil {
		return nil, nil, err
	}
	cfg := e.cfg.Load()
	share := cfg.ShareOf(owner)
	if err := e.owners.check(ctx, owner, share); err != nil {
		return nil, nil, err
	}
	runID := newID("run")
	switch e.queued.reserve(runID, owner, cfg.MaxQueued, share.MaxQueued) {
	case CodeQueueFull:
		e.stats.refused(CodeQueueFull)
		return nil, nil, protocolErr(CodeQueueFull, "%d runs are already queued (max_queued); try again later", cfg.MaxQueued)
	case CodeOwnerQuota:
		e.stats.refused(CodeOwnerQuota)
		return nil, nil, ownerQueuedErr(owner, share.MaxQueued)
	}

	run, task := build(runID, cfg)
	if failpoint.Armed(failpoint.DropAccepted) {
		e.queued.remove(runID)
		return run, nil, nil // the deliberate loss: nothing was written
	}
	var existing *store.Dedup
	err := e.st.Update(ctx, func(tx store.Tx) error {
		var err error
		existing, err = write(tx, run, task)
		return err
	})
	if err != nil || existing != nil {
		e.queued.remove(runID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, protocolErr(CodeBadRequest, "request abandoned: %v (resend with the same request id to learn whether it was accepted)", ctx.Err())
		}
		return nil, nil, storageErr(err)
	}
	if existing != nil {
		return nil, existing, nil
	}
	failpoint.Hit(failpoint.AfterAccept)
	e.stats.accepted()
	e.wake.kick()
	return run, nil, nil
}

// checkedStart is a start request past the checks that only read.
type checkedStart struct {
	req       StartRequest
	input     json.RawMessage // canonical (canonicalInput)
	inputHash string
	fe        *flowEntry // the flow's latest version, which input is valid for
}

// checkStart runs what a start only reads, before the gate: the
// request's checks, a re-send's answer (then the checked start is nil),
// the flow and the validation of the input against its schema.
func checkStart(ctx context.Context, st store.Store, book *flowBook, req StartRequest) (*checkedStart, *StartResult, error) {
	if req.Owner == "" {
		return nil, nil, protocolErr(CodeBadRequest, "no owner")
	}
	if err := checkStartRequestID(req); err != nil {
		return nil, nil, err
	}
	input, err := canonicalInput(req.Input)
	if err != nil {
		return nil, nil, err
	}
	inputHash := hashHex(input)

	if req.RequestID != "" {
		var d *store.Dedup
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			d, err = tx.DedupGet(req.Owner, req.RequestID)
			return err
		})
		switch {
		case err == nil:
			res, err := dedupAnswer(ctx, st, d, req.Flow, inputHash)
			return nil, res, err
		case !errors.Is(err, store.ErrNotFound):
			return nil, nil, storageErr(err)
		}
	}

	fe, err := book.latest(ctx, req.Flow)
	if err != nil {
		return nil, nil, err
	}
	if err := book.validateInput(ctx, fe, input); err != nil {
		return nil, nil, protocolErr(CodeBadInput, "input for flow %q: %v", req.Flow, err)
	}
	return &checkedStart{req: req, input: input, inputHash: inputHash, fe: fe}, nil, nil
}

// checkStartRequestID checks a client's request id (CheckRequestID); a
// derived one, of a run the daemon starts itself, only for its bounds.
func checkStartRequestID(req StartRequest) error {
	if req.startedBy == "" {
		return CheckRequestID(req.RequestID)
	}
	if len(req.RequestID) > MaxRequestIDBytes {
		return protocolErr(CodeBadRequestID, "a derived request id of %d bytes", len(req.RequestID))
	}
	return nil
}

// newRun is the record of the run cs starts as runID, accepted at now.
func (cs *checkedStart) newRun(runID string, cfg *Config, now time.Time) *store.Run {
	budget := cs.fe.flow.Budget
	if budget == 0 {
		budget = cfg.DefaultRunBudget
	}
	return &store.Run{
		ID: runID, Flow: cs.fe.flow.Name, Version: cs.fe.hash, Owner: cs.req.Owner,
		RequestID: cs.req.RequestID, StartedBy: cs.req.startedBy, Input: cs.input, InputHash: cs.inputHash,
		Phase: store.PhaseQueued, Attempt: 1, Ancestors: []string{}, DepthLimit: cs.fe.flow.MaxDepth,
		ConfigVersion: cfg.ConfigVersion, Budget: budget, CreatedAt: now, UpdatedAt: now,
	}
}

// newStepTask builds the task that advances run from node.
func newStepTask(run *store.Run, node string, now time.Time) *store.Task {
	// The task names its run's owner: the dispatcher shares slots by
	// owner (a task that names none is given its run's by the store).
	return &store.Task{ID: newID("task"), RunID: run.ID, Owner: run.Owner, Kind: store.TaskStep, Node: node, Attempt: 1, ReadyAt: now, CreatedAt: now}
}

// acceptTx writes a started run in tx: its request id's dedup record and
// the run (insertRun), or nothing when the request id already records a
// run (another acceptance committed it meanwhile), which it returns. A
// caller's traceparent and tracestate go into the accepted event.
func (j *journal) acceptTx(tx store.Tx, run *store.Run, task *store.Task, entry, traceParent, traceState string) (*store.Dedup, error) {
	if run.RequestID != "" {
		d, err := tx.DedupGet(run.Owner, run.RequestID)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err := tx.DedupPut(&store.Dedup{Owner: run.Owner, RequestID: run.RequestID, RunID: run.ID, Flow: run.Flow, InputHash: run.InputHash, CreatedAt: run.CreatedAt}); err != nil {
			return nil, err
		}
	}
	detail := map[string]any{"request_id": run.RequestID}
	if traceParent != "" {
		detail["traceparent"] = traceParent
		if traceState != "" {
			detail["tracestate"] = traceState
		}
	}
	return nil, j.insertRun(tx, run, task, entry, detail)
}

// insertRun writes a new run, its first task, its empty continuation and
// its acceptance events in tx.
func (j *journal) insertRun(tx store.Tx, run *store.Run, task *store.Task, entry string, detail map[string]any) error {
	if run.ParentRunID != "" {
		// A cancel recorded while the parent's step ran found no child to
		// cancel: none is started after it.
		if err := cancelNotSeenTx(tx, run.ParentRunID); err != nil {
			return err
		}
	}
	if err := tx.RunInsert(run); err != nil {
		return err
	}
	if err := tx.TaskPut(task); err != nil {
		return err
	}
	if err := tx.ContinuationPut(run.ID, encodeContinuation(newContinuation(entry))); err != nil {
		return err
	}
	if detail == nil {
		detail = map[string]any{}
	}
	detail["flow"], detail["version"], detail["owner"] = run.Flow, run.Version, run.Owner
	if err := appendEvent(tx, run.ID, evAccepted, run.Attempt, "", detail, run.CreatedAt); err != nil {
		return err
	}
	return appendEvent(tx, run.ID, evQueued, run.Attempt, entry, nil, run.CreatedAt)
}

// dedupAnswer answers a start whose request id d already records: the
// flow and the input are what the id means, so the recorded run is the
// answer only when both match, and E_DEDUP_CONFLICT otherwise. A record
// written before records kept their flow is checked through its run; one
// whose run retention has removed since is checked on its input alone.
func dedupAnswer(ctx context.Context, st store.Store, d *store.Dedup, flow, inputHash string) (*StartResult, error) {
	used := d.Flow
	if used == "" {
		err := st.View(ctx, func(tx store.Tx) error {
			r, err := tx.RunGet(d.RunID)
			if err == nil {
				used = r.Flow
			}
			return err
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, storageErr(err)
		}
	}
	of := ""
	if used != "" {
		of = fmt.Sprintf(" of flow %q", used)
	}
	if used != "" && used != flow {
		return nil, protocolErr(CodeDedupConflict, "request id %q was already used for run %s%s, not flow %q", d.RequestID, d.RunID, of, textbound.Quote(flow))
	}
	if d.InputHash != inputHash {
		return nil, protocolErr(CodeDedupConflict, "request id %q was already used for run %s%s with a different input", d.RequestID, d.RunID, of)
	}
	return &StartResult{RunID: d.RunID, Existing: true}, nil
}

// canonicalInput checks input is JSON and compacts it, so the same input
// hashes the same however it was spaced. Absent input is JSON null.
func canonicalInput(in json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(in)) == 0 {
		return json.RawMessage("null"), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, protocolErr(CodeBadInput, "input is not JSON: %v", err)
	}
	if dec.More() {
		return nil, protocolErr(CodeBadInput, "input has data after its JSON value")
	}
	out, err := json.Marshal(v) // map keys sorted: canonical
	if err != nil {
		return nil, protocolErr(CodeBadInput, "input: %v", err)
	}
	return out, nil
}

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Bytes formats a size for people: 12.3 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
