package apitypes

// Refusal codes of dead-letter operations.
const (
	// CodeRunEnded: the dead letter's run has ended; a redrive never
	// reopens it (fork it from the node instead).
	CodeRunEnded = "E_RUN_ENDED"
	// CodeNotDead: the task is not dead-lettered: redriven already, or it
	// never used up its tries.
	CodeNotDead = "E_NOT_DEAD"
)

// WaitExhausted is the kind of wait of a run whose task used up its
// retries on a node that says on_exhausted = "park": a redrive ends it.
const WaitExhausted = "exhausted"

// DeadLetterDetail is one dead letter with its run as it is now (GET
// /v1/deadletters/{task}); Run is absent when retention pruned it.
type DeadLetterDetail struct {
	DeadLetter DeadLetter `json:"dead_letter"`
	Run        *Run       `json:"run,omitempty"`
}

// RedriveRequest names the dead letters to send back (POST
// /v1/deadletters/redrive): task ids, or the caller's dead letters of a
// flow and/or a tool, or all of them; since (RFC 3339, or a Go duration
// back from now) narrows a selector.
type RedriveRequest struct {
	TaskIDs   []string `json:"task_ids,omitempty"`
	Flow      string   `json:"flow,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	All       bool     `json:"all,omitempty"`
	Since     string   `json:"since,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
}

// RedriveResult is the answer for one dead letter: redriven (the wait it
// decided), or refused with the error.
type RedriveResult struct {
	TaskID   string     `json:"task_id"`
	RunID    string     `json:"run_id,omitempty"`
	Node     string     `json:"node,omitempty"`
	Wait     string     `json:"wait,omitempty"`
	Redriven bool       `json:"redriven"`
	Error    *ErrorBody `json:"error,omitempty"`
}

// ErrorBody is a refusal's code and message inside a larger answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RedriveResponse answers a redrive, one result per dead letter; more
// says a selector matched more than one request redrives (send it again).
type RedriveResponse struct {
	Results []RedriveResult `json:"results"`
	More    bool            `json:"more,omitempty"`
}
