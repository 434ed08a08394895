package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Class says who an error belongs to (docs/design.md §5): protocol errors end a
// request, run errors end one run, storage errors close admission.
type Class string

// Error classes.
const (
	ClassProtocol Class = "protocol"
	ClassRun      Class = "run"
	ClassStorage  Class = "storage"
)

// Refusal codes returned by the engine's API. They are stable: they cross
// the socket and reach users.
const (
	CodeDraining      = "E_DRAINING"       // admission closed for shutdown
	CodeStorage       = "E_STORAGE"        // the store failed; admission is closed
	CodeQueueFull     = "E_QUEUE_FULL"     // no queue capacity left
	CodeUnknownFlow   = "E_UNKNOWN_FLOW"   // no such flow registered
	CodeDedupConflict = "E_DEDUP_CONFLICT" // request id reused for another flow or input
	CodeBadInput      = "E_BAD_INPUT"      // input is not valid for the flow
	CodeNotFound      = "E_NOT_FOUND"      // no such run (or not yours)
	CodeBadRequest    = "E_BAD_REQUEST"    // malformed request
	CodeBadRequestID  = "E_BAD_REQUEST_ID" // a request id a user may not send (E_BAD_REQUEST before)
	CodeForbidden     = "E_FORBIDDEN"      // the caller may not do this (a flow name another owner registered)
	CodeDiskFull      = "E_DISK_FULL"      // the store's disk is below its free-space watermark; reopens by itself
	CodeOwnerQuota    = "E_OWNER_QUOTA"    // the caller's own quota (max_queued, max_running, storage) is used up; others are unaffected
	CodeOwnerBudget   = "E_OWNER_BUDGET"   // the caller's budget_per_hour is spent for the window
)

// Run error codes: why a run or a node ended badly.
const (
	CodeOutcomeUnknown   = "E_OUTCOME_UNKNOWN"   // a non-idempotent call started and its result was never recorded
	CodeQueueTimeout     = "E_QUEUE_TIMEOUT"     // no slot or budget before the queue deadline
	CodeBudgetExhausted  = "E_BUDGET_EXHAUSTED"  // the run's budget cannot pay for the node
	CodeAttemptsExceeded = "E_ATTEMPTS_EXCEEDED" // the task's lease expired too many times
	CodeRetriesExhausted = "E_RETRIES_EXHAUSTED" // a retryable tool error on the last allowed try
	CodeToolFailed       = "E_TOOL"              // a tool answered a permanent error
	CodeUnknownTool      = "E_UNKNOWN_TOOL"      // no installed plugin provides the node's tool
	CodeCancelled        = "E_CANCELLED"         // the run was cancelled
	CodeCallable         = "E_CALLABLE"          // a flow callable failed at run time
	CodeScriptLimit      = "E_SCRIPT_LIMIT"      // a flow callable exceeded a script limit: the run fails
	CodeContinuation     = "E_CONTINUATION"      // the stored continuation cannot be read
	CodeFlowUnreadable   = "E_FLOW_UNREADABLE"   // the pinned flow version cannot be loaded
	CodeMaxVisits        = "E_MAX_VISITS"        // a node was entered more often than its max_visits
	CodeUnsupported      = "E_UNSUPPORTED"       // the node's kind is not one this engine runs
	CodeFanoutBounds     = "E_FANOUT_BOUNDS"     // items() returned more than max_items
	CodeResultTooLarge   = "E_RESULT_TOO_LARGE"  // a result or output is larger than one record may be
)

// codeToolKindPrefix names a tool failure that carries no code of its own
// after its kind: E_TOOL_RETRYABLE, E_TOOL_DEADLINE, ...
const codeToolKindPrefix = "E_TOOL_"

// Run-time refusals of subflow calls (docs/design.md §2: the static check is a
// courtesy, this is what holds) and the precise reasons a parent's node
// fails when its child is gone (docs/design.md §6).
const (
	CodeRuntimeDepth    = "E_RUNTIME_DEPTH"
	CodeRuntimeCycle    = "E_RUNTIME_CYCLE"
	CodeChildVanished   = "E_CHILD_VANISHED"
	CodeChildUnreadable = "E_CHILD_UNREADABLE"
	// CodeChildFailed: a child ended badly without an error of its own.
	CodeChildFailed = "E_CHILD_FAILED"
	// CodeChildTimeout: the child did not finish within the node's timeout.
	CodeChildTimeout = "E_CHILD_TIMEOUT"
)

// Codes of human waits.
const (
	CodeWaitTimeout     = "E_WAIT_TIMEOUT"     // nobody decided before the wait's timeout
	CodeRejected        = "E_REJECTED"         // the wait was rejected
	CodeNotWaiting      = "E_NOT_WAITING"      // the run is not waiting at that node
	CodeAlreadyDecided  = "E_ALREADY_DECIDED"  // the wait was decided before
	CodeStaleDecision   = "E_STALE_DECISION"   // the decision names a proposal digest the wait does not show
	CodeApprovalExpired = "E_APPROVAL_EXPIRED" // nobody decided an agent's proposed call within the node's approval_ttl
)

// Codes of forks (Ops.Fork).
const (
	CodeForkPoint   = "E_FORK_POINT"   // the fork point was never reached, does not exist, or does not fit the version asked for
	CodeForkEffects = "E_FORK_EFFECTS" // the fork would call at-most-once tools again and allow_effects was not given
)

// Error is an API error with a stable code, a message and its class.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Class   Class  `json:"class"`
	// Incident ties a storage error's fixed message (which quotes it) to
	// the daemon log line that holds its detail.
	Incident string `json:"-"`
	// RetryAfter, if positive, is how long the caller should wait before
	// a retry can succeed (an HTTP 429's Retry-After).
	RetryAfter time.Duration `json:"-"`
	// cause is the store's own error: it may quote record contents (keys
	// name owners and request ids), so it goes to the daemon log only,
	// never into Message.
	cause error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap gives the store's error to errors.Is and to the daemon log.
func (e *Error) Unwrap() error { return e.cause }

func protocolErr(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Class: ClassProtocol}
}

// storageErr classifies an error the store returned. A problem of one
// record (too large for a transaction, an id no key can hold) is the
// error of the run or request that wrote it (recordErr); anything else is
// a storage fault, answered with a fixed text and an incident id: the
// store's own words can quote keys, which name other users' owners and
// request ids.
func storageErr(err error) *Error {
	if rerr := recordErr(err); rerr != nil {
		return rerr
	}
	id := newIncident()
	return &Error{Code: CodeStorage, Class: ClassStorage, Incident: id, cause: err,
		Message: "the store failed (incident " + id + "; the detail is in the daemon log)"}
}

// recordErr is the per-record class of store errors, or nil: the write or
// key was refused before anything reached the disk, and the store is
// sound, so admission stays open.
func recordErr(err error) *Error {
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return &Error{Code: CodeResultTooLarge, Class: ClassRun, cause: err,
			Message: "the write is larger than one store transaction holds; keep results and outputs smaller"}
	case errors.Is(err, store.ErrDiskFull):
		return &Error{Code: CodeDiskFull, Class: ClassStorage, cause: err,
			Message: "the store's disk is full: it refuses writes until space returns (nothing was written)"}
	case errors.Is(err, store.ErrBadID):
		return &Error{Code: CodeBadRequest, Class: ClassProtocol, cause: err,
			Message: fmt.Sprintf("an id is empty, longer than %d bytes, not UTF-8 or holds a NUL byte", store.MaxIDBytes)}
	}
	return nil
}

// MaxResultBytes bounds one node's result, one fan-out child's result and
// a run's output, checked before the write. The store keeps a result in
// the run's continuation and beside the call that made it, in one
// transaction; with the store's default options one Badger transaction
// holds about 2.1 MB of values under 1 MiB, so two copies of a result at
// this bound and the rest of a step fit. A step whose writes are too large
// all the same (many results at once) fails its run with
// E_RESULT_TOO_LARGE as well.
const MaxResultBytes = 512 << 10

// resultTooLarge is the run error of a result over MaxResultBytes.
func resultTooLarge(what string, n int) *store.RunError {
	return &store.RunError{Code: CodeResultTooLarge,
		Message: fmt.Sprintf("%s is %d bytes, more than the %d bytes one result may be", what, n, MaxResultBytes)}
}

// newIncident names one storage fault for the log and the health report.
func newIncident() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "inc_" + hex.EncodeToString(b[:])
}

// ErrorCode returns the code of an *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// errLeaseLost aborts a step whose lease another worker (or the rescuer)
// has taken: the step's writes are discarded.
var errLeaseLost = errors.New("engine: lease lost")

// errAbandoned is a write of work whose evaluation the end of a drain's
// grace cut (liveRun.evalCut): refused like a lost lease's.
var errAbandoned = fmt.Errorf("%w: an evaluation was cut at the end of the drain's grace", errLeaseLost)
