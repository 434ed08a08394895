package apitypes

import (
	"encoding/json"
	"time"
)

// Version is the API version the types describe: every path starts with
// /Version/.
const Version = "v1"

// Bounds of the limit parameter of list endpoints: one answer cannot be
// made unbounded, and a client paging through a list uses them as its
// page size.
const (
	// MaxListLimit bounds GET /v1/runs and GET /v1/deadletters.
	MaxListLimit = 1000
	// DefaultListLimit is GET /v1/runs's page size when limit is not given.
	DefaultListLimit = 100
	// MaxFlowListLimit bounds a page of GET /v1/flows; DefaultFlowListLimit
	// is its size when limit is not given. A page carries each flow's doc
	// as a summary line and its input schema only up to
	// MaxListedInputBytes, so a page is at most a few MiB.
	MaxFlowListLimit     = 100
	DefaultFlowListLimit = 100
	// MaxListedInputBytes bounds the input schema a flow listing carries
	// for one flow (a larger one is omitted, and InputOmitted set).
	MaxListedInputBytes = 64 << 10
	// MaxEventLimit bounds GET /v1/runs/{id}/events and GET
	// /v1/admin/audit.
	MaxEventLimit = 10000
)

// Phase is where a run is in its life.
type Phase string

// The phases of a run.
const (
	PhaseQueued     Phase = "queued"
	PhaseRunning    Phase = "running"
	PhaseWaiting    Phase = "waiting"
	PhaseCompleting Phase = "completing"
	PhaseCompleted  Phase = "completed"
	PhaseCancelled  Phase = "cancelled"
	PhaseFailed     Phase = "failed"
)

// Terminal reports whether the phase is final: a run in it never changes
// phase again.
func (p Phase) Terminal() bool {
	return p == PhaseCompleted || p == PhaseCancelled || p == PhaseFailed
}

// StartRequest is the body of POST /v1/runs.
type StartRequest struct {
	Flow  string          `json:"flow"`
	Input json.RawMessage `json:"input,omitempty"`
	// RequestID is the caller's business id: re-sending a start with the
	// same id, flow and input returns the same run; with another flow or
	// input it is refused (E_DEDUP_CONFLICT). "" means no deduplication.
	RequestID string `json:"request_id,omitempty"`
}

// StartResult answers an accepted (or deduplicated) start: 201 for a new
// run, 200 for an existing one.
type StartResult struct {
	RunID string `json:"run_id"`
	// Existing is true when the request id matched an earlier run with the
	// same input: that run is returned and nothing new was accepted.
	Existing bool `json:"existing"`
}

// Run is a run as GET /v1/runs/{id} and GET /v1/runs show it.
type Run struct {
	ID        string          `json:"id"`
	Flow      string          `json:"flow"`
	Version   string          `json:"version"` // the flow version's content hash, pinned at start
	Owner     string          `json:"owner"`
	RequestID string          `json:"request_id,omitempty"`
	Phase     Phase           `json:"phase"`
	Attempt   int             `json:"attempt"`
	Input     json.RawMessage `json:"input,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     *RunError       `json:"error,omitempty"`
	// Progress is set by GET /v1/runs/{id} only (lists leave it out).
	Progress *Progress `json:"progress,omitempty"`
	Budget   int64     `json:"budget"`
	Spent    int64     `json:"spent"`
	// Overspent is the part of Spent that tools and models reported above
	// what their calls reserved; it buys the run no further work.
	Overspent int64 `json:"overspent,omitempty"`
	// Escrow is the part of Budget held by children in flight; what they
	// do not spend comes back when they end.
	Escrow int64 `json:"escrow,omitempty"`
	// Parent is the run whose subflow, fan-out or agent started this one.
	Parent string `json:"parent_run_id,omitempty"`
	// ParentNode is the parent's node (the subflow, fan-out or agent)
	// that started this run.
	ParentNode string `json:"parent_node,omitempty"`
	// ForkedFrom is where a forked run began; StartedBy what started a
	// run the daemon started itself ("fork:RUN:NODE@VISIT").
	ForkedFrom *ForkRef `json:"forked_from,omitempty"`
	StartedBy  string   `json:"started_by,omitempty"`
	// TraceID is the trace the run's spans are exported in (32 hex
	// digits): the caller's, from its traceparent, else the run's own.
	TraceID   string `json:"trace_id,omitempty"`
	CreatedAt string `json:"created_at"` // RFC 3339, UTC, milliseconds
	UpdatedAt string `json:"updated_at"`
	// Waits are the run's open waits, of every kind (GET /v1/runs/{id}
	// only): what it waits for, and what a person must decide.
	Waits []HumanWait `json:"waits,omitempty"`
}

// Conditions of GET /v1/runs/{id}/wait's until parameter: a phase name,
// UntilTerminal, UntilDecision (any open decision of the run or its
// descendants) or UntilDecision + ":" + a wait id or a node.
const (
	UntilTerminal = "terminal"
	UntilDecision = "decision"
)

// MaxRunWait bounds how long one GET /v1/runs/{id}/wait holds its answer
// (its timeout parameter, default and most); a client waiting longer asks
// again.
const MaxRunWait = 30 * time.Second

// RunWaitResult answers GET /v1/runs/{id}/wait: whether the condition
// holds (Met), the run as it was last read, and, for a decision
// condition, the open decisions that meet it. Met is false when the run
// ended without meeting it or the timeout passed first (tell the two
// apart by the run's phase).
type RunWaitResult struct {
	Met       bool        `json:"met"`
	Run       *Run        `json:"run"`
	Decisions []HumanWait `json:"decisions,omitempty"`
}

// RunError is the error a run or node ended with: a stable code and a
// message.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Progress is what a run has done so far, for display. It travels with the
// run's attempt and phase: after recovery it may restart.
type Progress struct {
	Attempt int   `json:"attempt"`
	Phase   Phase `json:"phase"`
	// Node is the node the run is at ("" once its graph is done).
	Node string `json:"node,omitempty"`
	// Done counts the nodes that produced a result.
	Done int `json:"done"`
	// Visits counts node entries so far.
	Visits int `json:"visits"`
	// Agents shows each agent node's latest visit: turns, tokens, cost.
	Agents []Agent `json:"agents,omitempty"`
	// Cohorts shows each fan-out's latest cohort.
	Cohorts []Cohort `json:"cohorts,omitempty"`
	// Tool is the running tool call's last progress report, if any.
	Tool *ToolProgress `json:"tool,omitempty"`
	// Items are the last progress reports of the fan-out items' running
	// tool calls, in item order.
	Items []ToolProgress `json:"items,omitempty"`
}

// Agent is what an agent node's latest visit has done so far: its model
// turns, their tokens, and what its turns and tool calls cost.
type Agent struct {
	Node         string `json:"node"`
	Visit        int    `json:"visit"`
	Turns        int    `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         int64  `json:"cost"`
	// CutTurns is how many asks of its turns crashes may have cut off
	// before their answers were journaled, and CutReserved the upper
	// bound of what they cost.
	CutTurns    int   `json:"cut_turns,omitempty"`
	CutReserved int64 `json:"cut_reserved,omitempty"`
	// RetriedTurns is how many tries of its turns failed and were tried
	// again, and RetriedInputTokens and RetriedOutputTokens what the
	// provider reported they used: billed, though no answer came.
	RetriedTurns        int   `json:"retried_turns,omitempty"`
	RetriedInputTokens  int64 `json:"retried_input_tokens,omitempty"`
	RetriedOutputTokens int64 `json:"retried_output_tokens,omitempty"`
}

// Cohort is one fan-out's cohort: what it admitted, what is in flight,
// what was published and judged mature, what came late, and how it closed.
type Cohort struct {
	Node      string    `json:"node"`
	Visit     int       `json:"visit"`
	State     string    `json:"state"`
	Items     int       `json:"items"`
	Need      int       `json:"need"`
	Admitted  int       `json:"admitted"`
	InFlight  int       `json:"in_flight"`
	Published int       `json:"published"`
	Mature    int       `json:"mature"`
	Failed    int       `json:"failed"`
	Stopped   int       `json:"stopped"`
	Late      int       `json:"late"`
	Cutoff    time.Time `json:"cutoff,omitzero"`
	// Sufficient is set once the cohort closes: whether enough items
	// matured before the cutoff.
	Sufficient *bool `json:"sufficient,omitempty"`
	Marker     bool  `json:"marker"`
	// Unknown lists the items whose call's outcome is unknown
	// (E_OUTCOME_UNKNOWN): stopped after a call that is not idempotent
	// started and before its result was recorded.
	Unknown []int `json:"unknown,omitempty"`
	// ChildBudget is what each child run reserves when its node and
	// flow declare no budget.
	ChildBudget int64 `json:"child_budget,omitempty"`
}

// ToolProgress is a running tool call's own report of how far it is.
type ToolProgress struct {
	Node string `json:"node"`
	// Item is the fan-out item the call is for; nil for a task node.
	Item  *int   `json:"item,omitempty"`
	Tool  string `json:"tool"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// CancelAnswer is the answer to a cancel.
type CancelAnswer string

// The three cancel answers.
const (
	// CancelRequested: the run will finish as cancelled.
	CancelRequested CancelAnswer = "requested"
	// CancelTooLate: the run's finish was already decided.
	CancelTooLate CancelAnswer = "too_late"
	// CancelAlreadyTerminal: the run had already ended.
	CancelAlreadyTerminal CancelAnswer = "already_terminal"
)

// CancelResponse answers POST /v1/runs/{id}/cancel.
type CancelResponse struct {
	Answer CancelAnswer `json:"answer"`
}

// Event is one entry of a run's timeline (GET /v1/runs/{id}/events), or of
// the audit stream (GET /v1/admin/audit).
type Event struct {
	Seq     uint64         `json:"seq"`
	RunID   string         `json:"run_id"`
	At      time.Time      `json:"at"`
	Type    string         `json:"type"`
	Attempt int            `json:"attempt,omitempty"`
	Node    string         `json:"node,omitempty"`
	Detail  map[string]any `json:"detail,omitempty"`
}

// DeadLetter is a task that exhausted its retries (GET /v1/deadletters).
type DeadLetter struct {
	TaskID string         `json:"task_id"`
	RunID  string         `json:"run_id"`
	Owner  string         `json:"owner"`
	Flow   string         `json:"flow"`
	Node   string         `json:"node"`
	Tool   string         `json:"tool,omitempty"`
	Errors []AttemptError `json:"errors"`
	At     time.Time      `json:"at"`
}

// AttemptError is the error of one attempt of a task.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// The kinds of wait (one wait model: every park has a wait id and a
// kind). Human and approval waits need a decision.
const (
	WaitHuman    = "human"    // a wait node: a person's decision
	WaitApproval = "approval" // a tool call an agent proposed, before it runs
	WaitChild    = "child"    // a child run's end, or an agent's tool calls
	WaitCohort   = "cohort"   // a fan-out's children
	WaitTimer    = "timer"    // a time: a retry's backoff
	// WaitRunaway: an agent's runaway guard tripped; a person resumes it
	// (approve, with an optional {"note": TEXT} payload the model is
	// sent) or ends it (reject, or cancel the run). Its id is
	// NODE@VISIT.runaway.N and it shows the diagnosis.
	WaitRunaway = "runaway"
)

// HumanWait is an open wait. GET /v1/runs/{id}/waits lists the open
// decisions (kinds human, approval and runaway) of a run and its descendants; GET
// /v1/runs/{id} shows every open wait of the run itself.
type HumanWait struct {
	// ID is the wait's id (NODE@VISIT, NODE@VISIT.TURN.CALL for a call an
	// agent proposed): a decision names it, or the node when exactly one
	// decision is open there.
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	RunID string `json:"run_id"`
	Flow  string `json:"flow"`
	Node  string `json:"node"`
	// Since is when the run parked on the wait; Until is its deadline
	// (far in the future for a wait without a timeout).
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Shown is what the decider is shown: a wait node's request
	// ({"request": ...}), or the call an agent proposed ({"tool",
	// "arguments", "digest", "turn", "call"}); a child wait shows
	// {"child": RUN}.
	Shown json.RawMessage `json:"shown,omitempty"`
	// Digest is an agent's approval's digest of the proposed call's
	// arguments (the SHA-256 of their canonical JSON, as shown.digest): a
	// decision that names it (DecideRequest.Digest) is taken only while
	// the wait shows that proposal.
	Digest string `json:"digest,omitempty"`
}

// NeedsDecision says whether the wait ends by a person's decision.
func (w HumanWait) NeedsDecision() bool {
	return w.Kind == WaitHuman || w.Kind == WaitApproval || w.Kind == WaitRunaway
}

// DecideRequest is the body of POST /v1/runs/{id}/waits/{wait}/approve
// (Payload or Result) and .../reject (Reason), where {wait} is a wait id,
// or a node where exactly one decision is open.
type DecideRequest struct {
	// Payload becomes the waiting node's result on approval. On an
	// agent's approval it is an edit: the arguments the proposed call
	// runs with instead (checked against the tool's input schema,
	// E_BAD_INPUT, the wait left open).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Result, on the approval of an agent's proposed call, answers the
	// call in the tool's place (a respond): it is the call's result
	// (checked against the tool's output schema, E_BAD_RESULT, the wait
	// left open) and the tool never runs. Present (null included) means
	// respond; it does not go with Payload.
	Result json.RawMessage `json:"result,omitempty"`
	// Reason is recorded in the run's events on rejection.
	Reason string `json:"reason,omitempty"`
	// Digest names the proposal the decider saw on an agent's approval
	// wait (its shown digest); a wait that shows another refuses the
	// decision with E_STALE_DECISION (409).
	Digest string `json:"digest,omitempty"`
}

// Decisions a DecideResponse reports.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
	// DecisionEdited: an agent's proposed call approved with edited
	// arguments; DecisionResponded: answered in the tool's place.
	DecisionEdited    = "edited"
	DecisionResponded = "responded"
)

// DecideResponse answers a decision.
type DecideResponse struct {
	RunID string `json:"run_id"`
	Node  string `json:"node"`
	// Wait and Kind are the id and kind of the wait decided.
	Wait     string `json:"wait,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Decision string `json:"decision"` // DecisionApproved or DecisionRejected
}

// SourceFile is one flow file sent for registration.
type SourceFile struct {
	Path string `json:"path"`
	Src  string `json:"src"`
}

// RegisterRequest is the body of POST /v1/flows: files checked and
// registered together.
type RegisterRequest struct {
	Files []SourceFile `json:"files"`
}

// RegisterResult answers a registration that passed the checks (200): the
// versions stored, and the warnings found.
type RegisterResult struct {
	Flows []Flow `json:"flows"`
	// Schedules are the schedules the files declare, as stored.
	Schedules []RegisteredSchedule `json:"schedules,omitempty"`
	// Triggers are the triggers (on_event) the files declare.
	Triggers    []RegisteredTrigger `json:"triggers,omitempty"`
	Diagnostics []Diagnostic        `json:"diagnostics,omitempty"`
}

// RegisteredTrigger is a trigger a registration stored.
type RegisteredTrigger struct {
	Name  string `json:"name"`
	Event string `json:"event"`
	Flow  string `json:"flow"`
}

// RegisteredSchedule is a schedule a registration stored.
type RegisteredSchedule struct {
	Name   string    `json:"name"`
	Flow   string    `json:"flow"`
	Next   time.Time `json:"next"`
	Paused bool      `json:"paused,omitempty"`
}

// RegisterRefusal answers a registration (or a check) whose files do not
// pass the checks (422): the error shape of every refusal, with Code
// CodeFlowInvalid and a message naming the first error, and every
// problem found, warnings included, in Diagnostics. Nothing was stored.
// (Before this shape the 422 was {flows, diagnostics} without a code.)
type RegisterRefusal struct {
	Code        string       `json:"code"`
	Message     string       `json:"message"`
	Class       string       `json:"class"`
	Diagnostics []Diagnostic `json:"diagnostics"`
}

// Flow describes one registered flow version (GET /v1/flows lists the
// latest version of each).
type Flow struct {
	Name  string `json:"name"`
	Hash  string `json:"hash"`
	Doc   string `json:"doc,omitempty"`
	Nodes int    `json:"nodes"`
	// Input is the JSON schema the flow declares for a run's input, if
	// any.
	Input json.RawMessage `json:"input,omitempty"`
	// Owner registered the flow's name first and is the only one who may
	// register new versions of it; everyone may read and run it.
	Owner string `json:"owner,omitempty"`
	// InputOmitted says a listing left out Input: it is larger than
	// MaxListedInputBytes. The flow's own read (GET /v1/flows/{name})
	// carries it.
	InputOmitted bool `json:"input_omitted,omitempty"`
}

// Diagnostic is one problem found while checking flow files, at a
// position: file, 1-based line and column (a zero line covers the whole
// file).
type Diagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Chain names the flows (or nodes, or files) that form the problem, in
	// order, for cycles and depth: ["a", "b", "a"].
	Chain []string `json:"chain,omitempty"`
	// Severity is "warning" for a warning (the flows registered anyway);
	// absent for an error.
	Severity string `json:"severity,omitempty"`
}

// Stats answers GET /v1/stats: the four figures per task type and the
// engine's counters.
type Stats struct {
	Types []TypeStats `json:"types"`
	// Refusals counts refused starts by refusal code.
	Refusals map[string]int64 `json:"refusals"`
	Counts   map[string]int64 `json:"counts"`
	// Models are agents' model turns per model ("llm.chat/small"): tokens
	// in and out and cost.
	Models []ModelStats `json:"models,omitempty"`
}

// OwnerStatsList answers GET /v1/stats/owners: each owner's use of the
// daemon and its share. The operator (the daemon's own OS user on the
// Unix socket) sees every owner (All); anyone else sees only their own.
type OwnerStatsList struct {
	Owners []OwnerStats `json:"owners"`
	All    bool         `json:"all"`
}

// OwnerStats is one owner's use of the daemon and its share.
type OwnerStats struct {
	Owner string `json:"owner"`
	// Running counts its runs started and not ended; Queued its runs
	// accepted and not yet started.
	Running int `json:"running"`
	Queued  int `json:"queued"`
	// Spent is the cost its runs were charged in the last hour (a
	// sliding window, by every daemon of the store).
	Spent int64 `json:"spent"`
	// Weight and the quotas in force (absent: none).
	Weight        int   `json:"weight"`
	MaxRunning    int   `json:"max_running,omitempty"`
	MaxQueued     int   `json:"max_queued,omitempty"`
	BudgetPerHour int64 `json:"budget_per_hour,omitempty"`
}

// ModelStats are the model turns agents took from one model.
type ModelStats struct {
	Model        string `json:"model"`
	Turns        int64  `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cost         int64  `json:"cost"`
	// Overspent is what turns were charged above their reservations.
	Overspent int64 `json:"overspent,omitempty"`
	// CutTurns is how many asks of the turns crashes may have cut off
	// before their answers were journaled, and CutReserved the upper
	// bound of their cost: the provider may have billed them, weir never
	// saw their usage.
	CutTurns    int64 `json:"cut_turns,omitempty"`
	CutReserved int64 `json:"cut_reserved,omitempty"`
	// RetriedTurns is how many tries of its turns failed and were tried
	// again since the daemon started, and RetriedInputTokens and
	// RetriedOutputTokens what the provider reported they used.
	RetriedTurns        int64 `json:"retried_turns,omitempty"`
	RetriedInputTokens  int64 `json:"retried_input_tokens,omitempty"`
	RetriedOutputTokens int64 `json:"retried_output_tokens,omitempty"`
	// The model's limits in force on this daemon (its share of the
	// fleet's; 0: none) and their use now: turns in flight, admitted in
	// the last minute with their tokens, in line, told to wait since the
	// daemon started, and until when the provider asked to wait.
	MaxConcurrent     int64     `json:"max_concurrent,omitempty"`
	RequestsPerMinute int64     `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64     `json:"tokens_per_minute,omitempty"`
	InFlight          int64     `json:"in_flight,omitempty"`
	StartedLastMinute int64     `json:"started_last_minute,omitempty"`
	TokensLastMinute  int64     `json:"tokens_last_minute,omitempty"`
	Booked            int64     `json:"booked,omitempty"`
	Waited            int64     `json:"waited,omitempty"`
	PausedUntil       time.Time `json:"paused_until,omitzero"`
}

// TypeStats are the figures for one task type (a tool name, or the node
// kind for steps that call no tool): mean wait, mean execution time and
// amplification. Their distributions are the daemon's Prometheus
// histograms; the queue's depth is Status.Queued.
type TypeStats struct {
	Type     string        `json:"type"`
	WaitMean time.Duration `json:"wait_mean_ns"`
	ExecMean time.Duration `json:"exec_mean_ns"`
	Attempts int64         `json:"attempts"`
	Units    int64         `json:"units"`
	// Amplification is attempts ÷ distinct work units (1 means no retry).
	Amplification float64 `json:"amplification"`
	// OverDeclared counts the tool's answers that reported a cost above
	// its declared cost, and OverUnits the units above it.
	OverDeclared int64 `json:"over_declared,omitempty"`
	OverUnits    int64 `json:"over_units,omitempty"`
	// QueueDepth is how many tasks of this type were ready and waiting
	// for a slot when the daemon last sampled its figures (every 10 s).
	QueueDepth int64 `json:"queue_depth"`
}

// AdmissionOpen is Status.Admission while the daemon accepts new runs;
// otherwise Admission holds the refusal code (CodeDraining, CodeStorage).
const AdmissionOpen = "open"

// Status answers GET /v1/health: admission, the queued and held task
// counts, the slots, the config in force, and who the caller is. It comes
// with 200 while admission is open and 503 otherwise.
type Status struct {
	Admission string `json:"admission"` // AdmissionOpen or the refusal code
	Reason    string `json:"reason,omitempty"`
	Queued    int    `json:"queued"`
	// Parked counts tasks waiting for a wake (a decision, a child run, a
	// timer): not queued.
	Parked int         `json:"parked"`
	Held   int         `json:"held"`
	Slots  int         `json:"slots"`
	Config *ConfigInfo `json:"config,omitempty"`
	Caller *Caller     `json:"caller"`
	// ServersDown lists the servers the daemon's plugins cannot reach (an
	// MCP server down), as each plugin last said.
	ServersDown []ServerDown `json:"servers_down,omitempty"`
}

// ServerDown is one server a plugin cannot reach, since when and why.
type ServerDown struct {
	Plugin string    `json:"plugin"`
	Name   string    `json:"name"`
	Since  time.Time `json:"since"`
	// Error is the last failure, cut to a line.
	Error string `json:"error,omitempty"`
}

// Open reports whether admission is open.
func (s *Status) Open() bool { return s.Admission == AdmissionOpen }

// Caller is who the daemon took a request to come from.
type Caller struct {
	// Owner owns the runs the caller starts and is the only one who sees
	// them.
	Owner string `json:"owner"`
	// Local is true on the Unix socket (the owner is the peer's OS user)
	// and false on TCP (the owner a bearer token maps to).
	Local bool `json:"local"`
}

// ConfigInfo describes the daemon's config in force.
type ConfigInfo struct {
	// Version counts the configs the daemon has run with; it is recorded
	// on every start event.
	Version int64 `json:"version"`
	// File is the config file ("" when the daemon runs on flags alone).
	File     string    `json:"file,omitempty"`
	Hash     string    `json:"hash"`
	LoadedAt time.Time `json:"loaded_at"`
	// Pinned lists the settings that command-line flags hold for the life
	// of the process, whatever the file says.
	Pinned []string `json:"pinned,omitempty"`
}

// ReloadResult answers POST /v1/admin/reload when the reload succeeded.
type ReloadResult struct {
	// Changed is false when the candidate's content equals the config in
	// force: nothing was swapped and the version stays.
	Changed  bool       `json:"changed"`
	Previous int64      `json:"previous_version"`
	Config   ConfigInfo `json:"config"`
	// Notes tell what the operator may not expect, such as a setting the
	// file changes that a flag pins.
	Notes []string `json:"notes,omitempty"`
}

// PluginRescan answers POST /v1/admin/plugins/rescan: what the daemon's
// plugin host changed after re-reading its plugins directory, by plugin
// name. New calls use what is in service now; calls in flight finish on
// the process they started on.
type PluginRescan struct {
	Added    []string `json:"added"`
	Upgraded []string `json:"upgraded"`
	Removed  []string `json:"removed"`
	// Unavailable are pinned plugins that could not be read; they provide
	// no tools.
	Unavailable []PluginProblem `json:"unavailable"`
	// Tools counts the tools in service.
	Tools int `json:"tools"`
	// PluginsDir is the directory the daemon read.
	PluginsDir string `json:"plugins_dir"`
}

// PluginProblem is a pinned plugin that could not be read, and why.
type PluginProblem struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// Error classes: every error answer is {"code", "message", "class"}, and
// the class says whose error it is.
const (
	// ClassProtocol: the request itself is refused (4xx); sending it again
	// unchanged gets the same answer.
	ClassProtocol = "protocol"
	// ClassRun: the request was valid but the run cannot do it.
	ClassRun = "run"
	// ClassStorage: the daemon's store failed (503); admission stays
	// closed until an operator acts.
	ClassStorage = "storage"
)

// FlowSource answers GET /v1/flows/{name}: the flow's latest registered
// version and the source files it was registered from. Every user may read
// registered flows.
type FlowSource struct {
	Flow
	// Version counts the name's registered versions: the latest has the
	// highest.
	Version      uint64    `json:"version"`
	RegisteredAt time.Time `json:"registered_at"`
	// Owner registered the version ("" before flows had owners).
	Owner string       `json:"owner,omitempty"`
	Files []SourceFile `json:"files"`
}

// FlowVersion is one registered version of a flow name (GET
// /v1/flows/{name}/versions lists them, newest first).
type FlowVersion struct {
	Version      uint64    `json:"version"`
	Hash         string    `json:"hash"`
	RegisteredAt time.Time `json:"registered_at"`
	Owner        string    `json:"owner,omitempty"`
}

// MaxStreamDuration bounds one server-sent event stream (GET
// /v1/runs/{id}/stream, GET /v1/runs/stream): the server ends it after
// this long, and a client that wants more connects again (with
// Last-Event-ID, a browser's EventSource does so by itself).
const MaxStreamDuration = 5 * time.Minute

// The event names of the server-sent event streams. A run's stream sends
// StreamRun (the run as GET /v1/runs/{id} shows it) whenever it changes
// and StreamEvent (one Event, whose seq is the message id) for each new
// event, and StreamEnd once the run is terminal and every event was sent.
// The run list's stream sends StreamRuns (a page as GET /v1/runs answers
// it) whenever the page changes. A run's stream asked with deltas=1 also
// sends StreamTurnDelta (one TurnDelta) for each piece of a model turn's
// text as the provider streams it.
const (
	StreamRun       = "run"
	StreamEvent     = "event"
	StreamEnd       = "end"
	StreamRuns      = "runs"
	StreamTurnDelta = "turn_delta"
)

// TurnDelta is one piece of a model turn's text, live: never journaled
// (the turn's whole answer is, in its event), shown only while the turn
// is in flight, on the daemon that runs it.
type TurnDelta struct {
	// Node, Visit and Turn name the turn (an agent's turns count from 1;
	// a task node calling a chat tool has turn 1).
	Node  string `json:"node"`
	Visit int    `json:"visit"`
	Turn  int    `json:"turn"`
	// Seq counts the turn's deltas from 1; Offset is where Text starts in
	// the turn's text, in bytes. A turn tried again starts over at seq 1,
	// offset 0.
	Seq    uint64 `json:"seq"`
	Offset int    `json:"offset"`
	Text   string `json:"text"`
}

// End is the offset just past the delta's text.
func (d TurnDelta) End() int { return d.Offset + len(d.Text) }

// StatsHistory answers GET /v1/stats/history: the daemon's figures
// sampled every Interval over the last Window, oldest first. The daemon
// keeps them in memory: a restart starts them empty.
type StatsHistory struct {
	Interval time.Duration `json:"interval_ns"`
	Window   time.Duration `json:"window_ns"`
	Samples  []StatsSample `json:"samples"`
}

// StatsSample is one moment of the history: the status at At, and the
// tools' and models' figures over the interval that ended at At (the
// means of that interval's observations; its attempts, units, turns,
// tokens and cost).
type StatsSample struct {
	At        time.Time    `json:"at"`
	Admission string       `json:"admission"`
	Slots     int          `json:"slots"`
	Queued    int          `json:"queued"`
	Parked    int          `json:"parked"`
	Held      int          `json:"held"`
	Types     []TypeStats  `json:"types"`
	Models    []ModelStats `json:"models,omitempty"`
}

// Schedule is one of the caller's schedules (GET /v1/schedules): a flow
// started on the ticks of a cron expression in a zone, or of a period.
type Schedule struct {
	Name       string          `json:"name"`
	Flow       string          `json:"flow"`
	Cron       string          `json:"cron,omitempty"`
	Every      string          `json:"every,omitempty"`
	Timezone   string          `json:"timezone,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Overlap    string          `json:"overlap"`
	CatchUp    string          `json:"catch_up"`
	MaxCatchUp int             `json:"max_catch_up,omitempty"`
	// Next is the first tick not yet fired or skipped.
	Next        time.Time `json:"next"`
	Paused      bool      `json:"paused,omitempty"`
	PausedBy    string    `json:"paused_by,omitempty"`
	PauseReason string    `json:"pause_reason,omitempty"`
	// Source is where the schedule was declared (file:line).
	Source string `json:"source,omitempty"`
	// Firings are the latest ticks fired or skipped, newest last.
	Firings   []ScheduleFiring `json:"firings"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	// Upcoming are the next ticks in the schedule's zone (shown for one
	// schedule, not in a listing).
	Upcoming []time.Time `json:"upcoming,omitempty"`
}

// ScheduleFiring is a tick a schedule fired (RunID, with the run's phase
// while the run is kept) or skipped (Skipped says why).
type ScheduleFiring struct {
	Tick    time.Time `json:"tick"`
	RunID   string    `json:"run_id,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Skipped string    `json:"skipped,omitempty"`
	At      time.Time `json:"at"`
}

// SchedulePauseRequest pauses a schedule (POST /v1/schedules/{name}/pause).
type SchedulePauseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ScheduleTriggerRequest fires a schedule now (POST
// /v1/schedules/{name}/trigger); a request id makes it once per id.
type ScheduleTriggerRequest struct {
	RequestID string `json:"request_id,omitempty"`
}

// EventSendRequest is an event the caller sends (POST /v1/events). The
// id is the sender's: the same id again is the same event.
type EventSendRequest struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// OwnerEvent is one of the caller's accepted events (POST and GET
// /v1/events). (Event is an entry of a run's timeline.)
type OwnerEvent struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Seq orders the caller's events; a listing pages with after=Seq.
	Seq uint64 `json:"seq"`
	// Delivered lists the waits that received it ("RUN/WAIT").
	Delivered []string `json:"delivered"`
	// TriggersPending says its triggers' runs are not all started yet.
	TriggersPending bool `json:"triggers_pending,omitempty"`
	// Started is what each trigger on its name did with it.
	Started []EventStart `json:"started"`
	// Duplicate says the id was accepted before (POST only).
	Duplicate  bool      `json:"duplicate,omitempty"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// EventStart is what one trigger did with an event: the run it started,
// or why it started none.
type EventStart struct {
	Trigger string `json:"trigger"`
	RunID   string `json:"run_id,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

// Trigger is one of the caller's triggers (GET /v1/triggers): a flow
// started for each of the caller's events of a name.
type Trigger struct {
	Name  string `json:"name"`
	Event string `json:"event"`
	Flow  string `json:"flow"`
	// Input and Filter say whether the declaration computes the input or
	// filters events.
	Input     bool      `json:"input,omitempty"`
	Filter    bool      `json:"filter,omitempty"`
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}
