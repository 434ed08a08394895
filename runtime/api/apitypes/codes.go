package apitypes

// Refusal codes: the code of an error answer. They are stable: scripts
// and applications match them.
const (
	// CodeBadRequest: the request is malformed (body, query, path).
	CodeBadRequest = "E_BAD_REQUEST"
	// CodeBadRequestID: the request id is one a user may not send: too
	// long, not printable UTF-8 (invalid bytes, lone surrogates, U+FFFD),
	// or starting with a prefix reserved for runs the daemon starts itself
	// (schedule:, event:, fork:, redrive:). Answered with 400; before it
	// existed such ids answered CodeBadRequest.
	CodeBadRequestID = "E_BAD_REQUEST_ID"
	// CodeNotFound: no such run, or not the caller's (the two are not told
	// apart).
	CodeNotFound = "E_NOT_FOUND"
	// CodeUnknownFlow: no flow of that name is registered.
	CodeUnknownFlow = "E_UNKNOWN_FLOW"
	// CodeBadInput: the input is not valid for the flow.
	CodeBadInput = "E_BAD_INPUT"
	// CodeDedupConflict: the request id was used before for another flow
	// or with another input.
	CodeDedupConflict = "E_DEDUP_CONFLICT"
	// CodeQueueFull: no queue capacity left; retry later (429).
	CodeQueueFull = "E_QUEUE_FULL"
	// CodeDraining: admission is closed because the daemon is stopping.
	CodeDraining = "E_DRAINING"
	// CodeStorage: the store failed; admission is closed until an operator
	// acts.
	CodeStorage = "E_STORAGE"
	// CodeNotWaiting: a decision names a node the run is not waiting at.
	CodeNotWaiting = "E_NOT_WAITING"
	// CodeAlreadyDecided: the wait was decided before.
	CodeAlreadyDecided = "E_ALREADY_DECIDED"
	// CodeStaleDecision: the decision names a proposal digest the
	// approval wait does not show.
	CodeStaleDecision = "E_STALE_DECISION"
	// CodeApprovalExpired: nobody decided an agent's proposed call within
	// its node's approval_ttl; the call was rejected and the model told.
	CodeApprovalExpired = "E_APPROVAL_EXPIRED"
	// CodeAmbiguousWait: a decision names a node where several decisions
	// are open (an agent's turn proposed several calls); name a wait id.
	CodeAmbiguousWait = "E_AMBIGUOUS_WAIT"

	// CodeForkPoint: a fork point the source never reached, a node its
	// flow lacks, or a point and copied results that do not fit the
	// version asked for (400).
	CodeForkPoint = "E_FORK_POINT"
	// CodeForkEffects: the fork would make at-most-once calls again and
	// allow_effects was not given; the message names each site (409).
	CodeForkEffects = "E_FORK_EFFECTS"

	// CodeIdentity: the caller's identity cannot be established (401).
	CodeIdentity = "E_IDENTITY"
	// CodeAPIVersion: the path names an API version the daemon does not
	// speak.
	CodeAPIVersion = "E_API_VERSION"
	// CodeNoRoute: no such endpoint.
	CodeNoRoute = "E_NO_ROUTE"
	// CodeMethod: the endpoint exists but not with this method.
	CodeMethod = "E_METHOD"
	// CodeTooLarge: the body exceeds the endpoint's limit.
	CodeTooLarge = "E_TOO_LARGE"
	// CodeForbidden: an admin endpoint called by someone other than the
	// daemon's own OS user on the Unix socket, or a flow registered under
	// a name another owner registered first.
	CodeForbidden = "E_FORBIDDEN"
	// CodeConfig: a reload candidate is invalid or needs a restart.
	CodeConfig = "E_CONFIG"
	// CodeNoConfig: the daemon has no config file to reload.
	CodeNoConfig = "E_NO_CONFIG"
	// CodeInternal: the engine failed with an error it did not classify.
	CodeInternal = "E_INTERNAL"
	// CodeTooManyConnections: the connection was refused because its peer
	// (or everyone together) has as many open as the daemon takes.
	CodeTooManyConnections = "E_TOO_MANY_CONNECTIONS"
	// CodeFlowInvalid: flow files sent for registration (or a check) do
	// not pass the checks (422); the answer is a RegisterRefusal whose
	// diagnostics say every problem. Nothing was registered.
	CodeFlowInvalid = "E_FLOW_INVALID"
	// CodeDiskFull: the daemon's disk is below its free-space watermark;
	// new work is refused until space returns (503).
	CodeDiskFull = "E_DISK_FULL"
	// CodeOwnerQuota: the caller's own quota (max_queued or max_running)
	// is used up; other owners are not affected (429, Retry-After).
	CodeOwnerQuota = "E_OWNER_QUOTA"
	// CodeOwnerBudget: the caller's runs spent its budget_per_hour in the
	// last hour (429, Retry-After: when enough of it leaves the window).
	CodeOwnerBudget = "E_OWNER_BUDGET"
)

// Run error codes: why a run or a node ended badly (Run.Error.Code, and
// the code of node_failed events).
const (
	CodeOutcomeUnknown   = "E_OUTCOME_UNKNOWN"   // a non-idempotent call started and its result was never recorded
	CodeQueueTimeout     = "E_QUEUE_TIMEOUT"     // no slot or budget before the queue deadline
	CodeBudgetExhausted  = "E_BUDGET_EXHAUSTED"  // the run's budget cannot pay for the node
	CodeAttemptsExceeded = "E_ATTEMPTS_EXCEEDED" // the task's lease expired too many times
	CodeRetriesExhausted = "E_RETRIES_EXHAUSTED" // a retryable tool error on the last allowed try
	CodeToolFailed       = "E_TOOL"              // a tool answered a permanent error
	CodeCancelled        = "E_CANCELLED"         // the run was cancelled
	CodeWaitTimeout      = "E_WAIT_TIMEOUT"      // nobody decided before the wait's timeout
	CodeRejected         = "E_REJECTED"          // the wait was rejected
)
