package engine

import (
	"errors"
	"fmt"
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
	CodeDedupConflict = "E_DEDUP_CONFLICT" // request id reused with a different input
	CodeBadInput      = "E_BAD_INPUT"      // input is not valid for the flow
	CodeNotFound      = "E_NOT_FOUND"      // no such run (or not yours)
	CodeBadRequest    = "E_BAD_REQUEST"    // malformed request
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
	CodeContinuation     = "E_CONTINUATION"      // the stored continuation cannot be read
	CodeFlowUnreadable   = "E_FLOW_UNREADABLE"   // the pinned flow version cannot be loaded
	CodeMaxVisits        = "E_MAX_VISITS"        // a node was entered more often than its max_visits
	CodeUnsupported      = "E_UNSUPPORTED"       // the node's kind is not one this engine runs
	CodeFanoutBounds     = "E_FANOUT_BOUNDS"     // items() returned more than max_items
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
	CodeWaitTimeout    = "E_WAIT_TIMEOUT"    // nobody decided before the wait's timeout
	CodeRejected       = "E_REJECTED"        // the wait was rejected
	CodeNotWaiting     = "E_NOT_WAITING"     // the run is not waiting at that node
	CodeAlreadyDecided = "E_ALREADY_DECIDED" // the wait was decided before
)

// Error is an API error with a stable code, a message and its class.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Class   Class  `json:"class"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func protocolErr(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Class: ClassProtocol}
}

func storageErr(err error) *Error {
	return &Error{Code: CodeStorage, Message: "the store failed, admission is closed until an operator acts: " + err.Error(), Class: ClassStorage}
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
