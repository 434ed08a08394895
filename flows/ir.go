package flows

import (
	"encoding/json"
	"fmt"
	"time"
)

// IRVersion is the version of the IR's JSON encoding. It is written into
// every encoded Flow so that a store can tell old encodings apart. Version
// 2 added the agent node, version 3 the wait for an event (Node.Event,
// Node.Match), version 4 the projections (Flow.Projections); older
// encodings decode unchanged, and a weir that reads only an older version
// refuses a newer one rather than misreading an agent node or taking an
// event wait for an approval.
const IRVersion = 4

// minIRVersion is the oldest encoding this weir still decodes.
const minIRVersion = 1

// DefaultMaxDepth is a flow's max_depth when it declares none.
const DefaultMaxDepth = 8

// DefaultQuorum is a fanout's quorum when it declares none: every child
// must mature.
const DefaultQuorum = 1.0

// DefaultGrace is a fanout's grace when it declares none: how long in-flight
// children may keep running after the cohort freezes before unprotected ones
// are stopped.
const DefaultGrace = 30 * time.Second

// NodeKind says what a node does when the run reaches it.
type NodeKind string

// Node kinds, one per builtin.
const (
	// KindTask calls one tool.
	KindTask NodeKind = "task"
	// KindSubflow starts a child run of another flow and suspends until it
	// is terminal.
	KindSubflow NodeKind = "subflow"
	// KindFanout starts one child (a tool call or a child run) per item,
	// as a cohort that closes by sufficiency.
	KindFanout NodeKind = "fanout"
	// KindWait suspends the run until an external decision (an approval)
	// or its timeout.
	KindWait NodeKind = "wait"
	// KindBranch evaluates a condition and follows then or otherwise.
	KindBranch NodeKind = "branch"
	// KindAgent runs a bounded loop of model turns and the tool calls
	// (and child runs) each turn asks for.
	KindAgent NodeKind = "agent"
)

// CallableRef names a value the script passed to a builtin: a callable
// (function or lambda) or a constant. It is stable across re-loads of the
// same source: an Evaluator built from the flow's stored sources resolves it
// to the same value. Node is empty for flow-level parameters (output).
// Decl is set instead of Flow and Node for the callables of a declaration
// beside the flows ("schedule:NAME", "trigger:NAME"): those are called with
// one argument, the tick or the event, and no ctx.
type CallableRef struct {
	Flow  string `json:"flow"`
	Node  string `json:"node,omitempty"`
	Param string `json:"param"`
	Decl  string `json:"decl,omitempty"`
}

// String names the ref as flow.node.param (flow.param for flow-level ones,
// schedule:NAME.param for a declaration's).
func (r CallableRef) String() string {
	if r.Decl != "" {
		return r.Decl + "." + r.Param
	}
	if r.Node == "" {
		return r.Flow + "." + r.Param
	}
	return r.Flow + "." + r.Node + "." + r.Param
}

// Flow is the graph IR of one registered flow version. The runtime walks it;
// callables are evaluated through an Evaluator built from the flow's
// sources. A Flow is immutable once loaded and safe for concurrent reads.
type Flow struct {
	// Name is the flow's name, unique among registered flows.
	Name string
	// Doc is the flow's description.
	Doc string
	// MaxDepth bounds the subflow chain below this flow (DefaultMaxDepth
	// if not declared).
	MaxDepth int
	// Budget is the cost units one run may spend, children included; 0
	// means the flow declares no budget of its own.
	Budget int64
	// Entry is the id of the node a run starts at: the first node declared.
	Entry string
	// Nodes are the flow's nodes in declaration order.
	Nodes []*Node
	// Output computes the run's result from its context, if declared;
	// nil means the result of the last node that ran.
	Output *CallableRef
	// Input is the JSON schema a run's input must satisfy, if declared.
	Input json.RawMessage
	// Projections are the callables registration proved do nothing but
	// project their ctx (Proj), by CallableRef.String(): the runtime
	// evaluates them without a sandbox round trip.
	Projections map[string]*Proj
	// Hash identifies this version: it covers the flow's name and
	// SourceHash. Registries and stores key versions by it.
	Hash string
	// SourceHash identifies the flow's sources (the file declaring it and
	// everything that file loads); evaluators are cached by it.
	SourceHash string
	// Pos is the position of the flow() call.
	Pos Pos

	index map[string]*Node
	input *inputSchema
}

// Node returns the node with the given id, or nil.
func (f *Flow) Node(id string) *Node {
	if f.index != nil {
		return f.index[id]
	}
	for _, n := range f.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Seal readies a flow a front end has built for use: its nodes indexed by
// id (the first node of each id) and its input schema compiled once, on
// first use, however many validations share it. A decoded flow is sealed
// already. Call it once the flow's nodes are final.
func (f *Flow) Seal() {
	f.buildIndex()
	f.input = &inputSchema{}
}

func (f *Flow) buildIndex() {
	f.index = make(map[string]*Node, len(f.Nodes))
	for _, n := range f.Nodes {
		if _, dup := f.index[n.ID]; !dup {
			f.index[n.ID] = n
		}
	}
}

// Calls lists the nodes that call another flow (subflow, fanout with
// flow =, and agent with flows =), in declaration order; each node's
// Callees name the flows it calls.
func (f *Flow) Calls() []*Node {
	var calls []*Node
	for _, n := range f.Nodes {
		if n.Flow != "" || len(n.Flows) > 0 {
			calls = append(calls, n)
		}
	}
	return calls
}

// Callees names the flows the node may start as child runs: the Flow of a
// subflow or fanout, the Flows an agent offers its model.
func (n *Node) Callees() []string {
	if n.Flow != "" {
		return []string{n.Flow}
	}
	return n.Flows
}

// What a task does when its retries are used up (Node.OnExhausted).
const (
	// OnExhaustedFail dead-letters the task and takes the error wire.
	OnExhaustedFail = "fail"
	// OnExhaustedPark dead-letters the task and parks the run until the
	// dead letter is redriven.
	OnExhaustedPark = "park"
)

// Parks says whether the node parks its run when its retries are used up.
func (n *Node) Parks() bool { return n.OnExhausted == OnExhaustedPark }

// What a task, a fanout item or an agent's call does when its call's
// outcome is unknown and the tool's probe could not settle it
// (Node.OnUnknown, DESIGN §12).
const (
	// OnUnknownFail takes the error wire with E_OUTCOME_UNKNOWN.
	OnUnknownFail = "fail"
	// OnUnknownAsk parks the run on a wait of kind unknown until a person
	// resolves it (happened, with a result; or not happened) or its
	// unknown_timeout passes.
	OnUnknownAsk = "ask"
)

// DefaultUnknownTimeout is how long an unknown wait waits for a person
// when the node sets no unknown_timeout.
const DefaultUnknownTimeout = 24 * time.Hour

// Asks says whether the node parks its run for a person when its call's
// outcome is unknown.
func (n *Node) Asks() bool { return n.OnUnknown == OnUnknownAsk }

// The runaway guard of an agent (Node.RepeatLimit, Node.ErrorLimit,
// Node.OnRunaway; docs/agents.md): what it counts and what it does when a
// count reaches its limit.
const (
	// DefaultRepeatLimit is how many times one visit of an agent may make
	// the same call (tool and arguments) answered with the same result
	// before the guard trips: more than once, since an agent may rightly
	// read again something that changes.
	DefaultRepeatLimit = 5
	// DefaultErrorLimit is how many calls in a row of one visit may end
	// with the same error code before the guard trips.
	DefaultErrorLimit = 3
	// MaxRunawayLimit bounds repeat_limit and error_limit: a loop that
	// needs more is better split into nodes.
	MaxRunawayLimit = 1000
	// OnRunawayAsk (the default) parks the run on a wait of kind runaway
	// until a person resumes it (approve) or ends it (reject, cancel).
	OnRunawayAsk = "ask"
	// OnRunawayFail takes the node's error wire with E_AGENT_RUNAWAY.
	OnRunawayFail = "fail"
)

// What an agent does when the run's budget cannot cover its next model
// turn (Node.OnBudget).
const (
	// OnBudgetFail (or empty) takes the error wire with E_BUDGET_EXHAUSTED.
	OnBudgetFail = "fail"
	// OnBudgetAsk parks the run on a wait of kind budget until its owner
	// raises the run's budget (weir run budget RUN --add N).
	OnBudgetAsk = "ask"
)

// RepeatLimitOrDefault is the agent's repeat_limit, or DefaultRepeatLimit.
func (n *Node) RepeatLimitOrDefault() int {
	if n.RepeatLimit > 0 {
		return n.RepeatLimit
	}
	return DefaultRepeatLimit
}

// ErrorLimitOrDefault is the agent's error_limit, or DefaultErrorLimit.
func (n *Node) ErrorLimitOrDefault() int {
	if n.ErrorLimit > 0 {
		return n.ErrorLimit
	}
	return DefaultErrorLimit
}

// Node is one step of a flow's graph. Which fields are meaningful depends on
// Kind; docs/flows.md documents each builtin parameter.
type Node struct {
	// ID is the node's id, unique within its flow.
	ID string
	// Kind is the builtin that declared the node.
	Kind NodeKind
	// Pos is the position of the builtin call that declared the node.
	Pos Pos
	// Doc describes the node.
	Doc string

	// Tool is the tool a task calls, or a fanout calls per item. An agent
	// keeps its tools in ModelTool, Tools and Approve instead.
	Tool string
	// Flow is the flow a subflow starts, or a fanout starts per item.
	Flow string
	// Args builds the input: args(ctx) for task, subflow and wait (the
	// approval's payload), args(ctx, item) for a fanout's children. Nil: a
	// task, subflow or wait gets {}; a fanout child gets {"item": item}.
	Args *CallableRef

	// Event is the name of the event a wait waits for (ValidEventName);
	// empty: the wait waits for a decision. Match computes the key the
	// event must carry: match(ctx) -> string, or a constant string.
	Event string
	Match *CallableRef

	// Next is the ok wire; empty ends the run successfully.
	Next string
	// Error is the error wire; empty fails the run when the node fails.
	Error string

	// Retries is the number of automatic retries after a failed attempt
	// (a task, or each child of a tool fanout).
	Retries int
	// AtMostOnce accepts at-most-once semantics: an attempt whose outcome
	// is unknown takes the error wire instead of being run again. On an
	// agent it covers every non-idempotent tool of Tools not in Approve
	// (and a non-idempotent ModelTool): their calls run at most once
	// without a person.
	AtMostOnce bool
	// MaxVisits bounds how often one run may enter this node; 0 means no
	// declared bound (the node may not then lie on a cycle unless another
	// node of the cycle declares one).
	MaxVisits int
	// Timeout is the deadline of one attempt (task), of the child run
	// (subflow), of each child (fanout), of the wait itself (wait, which
	// then takes its error wire), or of the whole agent loop (agent). 0:
	// none declared.
	Timeout time.Duration
	// Cost is the declared cost units of one attempt (per child for a
	// fanout); 0: use the tool's declared cost. On an agent it caps what
	// the node may spend, turns and tool calls together; 0: only the run's
	// budget bounds it.
	Cost int64
	// Budget is the budget of the child run a subflow starts, or of each
	// child run of a flow fanout, reserved out of the parent's remainder
	// when the child is admitted (escrow, docs/design.md §11); 0: none
	// declared (docs/flows.md says what the child reserves then).
	Budget int64
	// Protected work is never killed by a cohort stop; it is let finish.
	Protected bool
	// OnExhausted is what a task (or each item of a fanout of a tool)
	// does when its retries are used up: OnExhaustedFail (or empty:
	// neither the node nor, for a task, its flow says) dead-letters the
	// task and takes the error wire (the item fails); OnExhaustedPark
	// dead-letters it and parks the run (the item, in flight) on a wait
	// of kind exhausted until the dead letter is redriven.
	OnExhausted string
	// OnUnknown is what a task, each item of a fanout of a tool, or each
	// tool call of an agent does when its call's outcome stays unknown
	// (the tool is at most once, the call ended without an answer and no
	// probe settled it): OnUnknownFail (or empty) takes the error wire
	// with E_OUTCOME_UNKNOWN (an item fails; an agent's model is told);
	// OnUnknownAsk parks the call on an unknown wait for at most
	// UnknownTimeout (0: DefaultUnknownTimeout).
	OnUnknown      string
	UnknownTimeout time.Duration
	// ApprovalTTL bounds how long each approval wait of an agent (a call
	// of one of its approve tools) waits for a decision: past it the call
	// is rejected with E_APPROVAL_EXPIRED, which the model is told. 0:
	// until the agent's timeout, if it has one.
	ApprovalTTL time.Duration
	// RepeatLimit and ErrorLimit are an agent's runaway guard: the same
	// call (tool and arguments digest) answered with the same result
	// RepeatLimit times in one visit, or ErrorLimit calls in a row ending
	// with the same error code, trip it (0: DefaultRepeatLimit,
	// DefaultErrorLimit). OnRunaway is what it does then: OnRunawayAsk
	// (or empty) parks the run on a runaway wait, OnRunawayFail takes the
	// error wire with E_AGENT_RUNAWAY.
	RepeatLimit int
	ErrorLimit  int
	OnRunaway   string
	// OnBudget is what an agent does when the run's budget cannot cover
	// its next model turn: OnBudgetFail (or empty) takes the error wire
	// with E_BUDGET_EXHAUSTED; OnBudgetAsk parks the run on a budget wait
	// until its owner raises the budget. A flow's on_budget is the
	// default of its agents.
	OnBudget string

	// Cond decides a branch: cond(ctx), truthy follows Then.
	Cond *CallableRef
	// Then is the branch's wire when Cond is truthy; empty ends the run.
	Then string
	// Otherwise is the branch's wire when Cond is falsy; empty ends the run.
	Otherwise string

	// Items computes a fanout's items: items(ctx) returns a list.
	Items *CallableRef
	// Width is the most children in flight at once.
	Width int
	// Depth is the generations of delegation allowed below the fanout
	// node (its children are generation 1).
	Depth int
	// MaxItems is the declared upper bound on len(items).
	MaxItems int
	// Quorum is the share of children (0 < q <= 1) that must mature for
	// the cohort to close sufficiently.
	Quorum float64
	// Deadline is the cohort's fuse: when it trips the cohort closes anyway
	// and records whether maturity was sufficient. 0: none declared.
	Deadline time.Duration
	// Grace bounds how long in-flight children keep running after the
	// cohort freezes, before unprotected ones are stopped.
	Grace time.Duration
	// Reduce computes the fanout's result: reduce(ctx, results), where
	// results is the list of published child results in item order. Nil:
	// the result is that list.
	Reduce *CallableRef
	// Mature decides whether a child's published result counts toward the
	// quorum: mature(ctx, item, result). Nil: every child that finished ok
	// is mature.
	Mature *CallableRef

	// ModelTool is the chat tool an agent's turns call: the script's
	// model_tool, or DefaultModelTool when it gives only model.
	ModelTool string
	// Model is the model alias an agent asks ModelTool for; empty: the
	// tool's own default.
	Model string
	// System builds an agent's system prompt: system(ctx) -> string, or a
	// constant string. Nil: no system prompt.
	System *CallableRef
	// Prompt builds an agent's first user message: prompt(ctx) -> string,
	// or a constant string.
	Prompt *CallableRef
	// Tools are the tools an agent's model may call, in declaration order.
	Tools []string
	// Flows are the flows an agent's model may start as child runs, each
	// offered as a tool whose input is the flow's input.
	Flows []string
	// Approve are the tools of Tools whose every call waits for a person
	// before it runs.
	Approve []string
	// MaxTurns bounds an agent's model turns (1..MaxAgentTurns); an
	// output correction counts as a turn.
	MaxTurns int
	// MaxTokens bounds the output tokens of one model turn; 0: the model's
	// own limit.
	MaxTokens int
	// OutputSchema is the JSON schema an agent's final answer must
	// satisfy, if declared.
	OutputSchema json.RawMessage

	// Site is where the node's call writes its arguments, as the front
	// end that loaded it knows; nil for a node decoded from stored IR.
	// It is for diagnostics only and is not part of the IR's JSON.
	Site CallSite
}

// CallSite is where one builtin call of a script writes its arguments:
// registration points a diagnostic at the argument, or the list entry, that
// causes it. A front end implements it for the nodes it builds.
type CallSite interface {
	// ArgPos is the position of the named keyword argument, or of the
	// call when the argument is not written there.
	ArgPos(param string) Pos
	// ElemPos is the position of entry i of the list literal written for
	// param, or ArgPos(param) when it is no literal.
	ElemPos(param string, i int) Pos
}

// Wire is one outgoing edge of a node.
type Wire struct {
	// Label is the parameter that declares the wire: next, error, then or
	// otherwise.
	Label string
	// To is the target node id.
	To string
}

// Wires lists the node's outgoing edges in a fixed order: next, error,
// then, otherwise (only the declared ones).
func (n *Node) Wires() []Wire {
	var ws []Wire
	n.EachWire(func(w Wire) { ws = append(ws, w) })
	return ws
}

// EachWire calls f with each outgoing edge, in the order of Wires, without
// building the list.
func (n *Node) EachWire(f func(Wire)) {
	for _, w := range [...]Wire{{"next", n.Next}, {"error", n.Error}, {"then", n.Then}, {"otherwise", n.Otherwise}} {
		if w.To != "" {
			f(w)
		}
	}
}

// ArgPos is the position of the named keyword argument in the node's call,
// or the node's own position when the argument was not written there.
func (n *Node) ArgPos(param string) Pos {
	if n.Site != nil {
		return n.Site.ArgPos(param)
	}
	return n.Pos
}

// ToolUse is one place a flow names a tool it calls.
type ToolUse struct {
	Tool string
	Node *Node
	// Pos is where the script names the tool.
	Pos Pos
}

// ToolUses lists every tool the flow's nodes call, in declaration order:
// a task's or a tool fanout's tool, an agent's model tool and its tools.
// The flows a node starts are runs of their own, with their own tools.
func (f *Flow) ToolUses() []ToolUse {
	var out []ToolUse
	for _, n := range f.Nodes {
		if n.Tool != "" {
			out = append(out, ToolUse{Tool: n.Tool, Node: n, Pos: n.ArgPos("tool")})
		}
		if n.ModelTool != "" {
			out = append(out, ToolUse{Tool: n.ModelTool, Node: n, Pos: n.ArgPos("model_tool")})
		}
		for i, t := range n.Tools {
			out = append(out, ToolUse{Tool: t, Node: n, Pos: n.ElemPos("tools", i)})
		}
	}
	return out
}

// ElemPos is the position of entry i of the list literal written for
// param (tools = ["a", "b"]), or of the argument when it is no literal.
func (n *Node) ElemPos(param string, i int) Pos {
	if n.Site != nil {
		return n.Site.ElemPos(param, i)
	}
	return n.Pos
}

// Encoded forms. Durations are written as strings ("10m0s", "30d") so that
// stored IR stays readable; everything else uses snake_case names.

type flowJSON struct {
	IRVersion int             `json:"ir_version"`
	Name      string          `json:"name"`
	Doc       string          `json:"doc,omitempty"`
	MaxDepth  int             `json:"max_depth"`
	Budget    int64           `json:"budget,omitempty"`
	Entry     string          `json:"entry"`
	Nodes     []*Node         `json:"nodes"`
	Output    *CallableRef    `json:"output,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Projections (version 4) are the callables proven to only project
	// their ctx, by CallableRef.String().
	Projections map[string]*Proj `json:"projections,omitempty"`
	Hash        string           `json:"hash"`
	SourceHash  string           `json:"source_hash"`
	Pos         Pos              `json:"pos"`
}

// MarshalJSON encodes the flow's IR.
func (f *Flow) MarshalJSON() ([]byte, error) {
	return json.Marshal(flowJSON{
		IRVersion: IRVersion, Name: f.Name, Doc: f.Doc, MaxDepth: f.MaxDepth, Budget: f.Budget,
		Entry: f.Entry, Nodes: f.Nodes, Output: f.Output, Input: f.Input, Projections: f.Projections,
		Hash: f.Hash, SourceHash: f.SourceHash, Pos: f.Pos,
	})
}

// UnmarshalJSON decodes IR written by MarshalJSON and rebuilds the node
// index. An encoding from a newer IRVersion is refused.
func (f *Flow) UnmarshalJSON(b []byte) error {
	var j flowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.IRVersion < minIRVersion || j.IRVersion > IRVersion {
		return fmt.Errorf("flow IR version %d: this weir reads versions %d to %d", j.IRVersion, minIRVersion, IRVersion)
	}
	*f = Flow{
		Name: j.Name, Doc: j.Doc, MaxDepth: j.MaxDepth, Budget: j.Budget, Entry: j.Entry,
		Nodes: j.Nodes, Output: j.Output, Input: j.Input, Projections: j.Projections, Hash: j.Hash, SourceHash: j.SourceHash, Pos: j.Pos,
	}
	for i, n := range f.Nodes {
		if n == nil {
			return fmt.Errorf("flow %q: node %d is null", f.Name, i)
		}
	}
	f.buildIndex()
	f.input = &inputSchema{}
	return nil
}

type nodeJSON struct {
	ID         string       `json:"id"`
	Kind       NodeKind     `json:"kind"`
	Pos        Pos          `json:"pos"`
	Doc        string       `json:"doc,omitempty"`
	Tool       string       `json:"tool,omitempty"`
	Flow       string       `json:"flow,omitempty"`
	Args       *CallableRef `json:"args,omitempty"`
	Next       string       `json:"next,omitempty"`
	Error      string       `json:"error,omitempty"`
	Retries    int          `json:"retries,omitempty"`
	AtMostOnce bool         `json:"at_most_once,omitempty"`
	MaxVisits  int          `json:"max_visits,omitempty"`
	Timeout    jsonDuration `json:"timeout,omitempty"`
	Cost       int64        `json:"cost,omitempty"`
	Budget     int64        `json:"budget,omitempty"`
	Protected  bool         `json:"protected,omitempty"`
	Cond       *CallableRef `json:"cond,omitempty"`
	Then       string       `json:"then,omitempty"`
	Otherwise  string       `json:"otherwise,omitempty"`
	Items      *CallableRef `json:"items,omitempty"`
	Width      int          `json:"width,omitempty"`
	Depth      int          `json:"depth,omitempty"`
	MaxItems   int          `json:"max_items,omitempty"`
	Quorum     float64      `json:"quorum,omitempty"`
	Deadline   jsonDuration `json:"deadline,omitempty"`
	Grace      jsonDuration `json:"grace,omitempty"`
	Reduce     *CallableRef `json:"reduce,omitempty"`
	Mature     *CallableRef `json:"mature,omitempty"`
	// Agent fields, since IR version 2.
	ModelTool    string          `json:"model_tool,omitempty"`
	Model        string          `json:"model,omitempty"`
	System       *CallableRef    `json:"system,omitempty"`
	Prompt       *CallableRef    `json:"prompt,omitempty"`
	Tools        []string        `json:"tools,omitempty"`
	Flows        []string        `json:"flows,omitempty"`
	Approve      []string        `json:"approve,omitempty"`
	MaxTurns     int             `json:"max_turns,omitempty"`
	MaxTokens    int             `json:"max_tokens,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`

	// OnExhausted is omitted when empty, so a flow that does not say
	// encodes as before.
	OnExhausted string `json:"on_exhausted,omitempty"`
	// OnUnknown and UnknownTimeout likewise.
	OnUnknown      string       `json:"on_unknown,omitempty"`
	UnknownTimeout jsonDuration `json:"unknown_timeout,omitempty"`
	// ApprovalTTL likewise.
	ApprovalTTL jsonDuration `json:"approval_ttl,omitempty"`
	// RepeatLimit, ErrorLimit and OnRunaway likewise.
	RepeatLimit int    `json:"repeat_limit,omitempty"`
	ErrorLimit  int    `json:"error_limit,omitempty"`
	OnRunaway   string `json:"on_runaway,omitempty"`
	OnBudget    string `json:"on_budget,omitempty"`

	// Event and Match, since IR version 3.
	Event string       `json:"event,omitempty"`
	Match *CallableRef `json:"match,omitempty"`
}

// MarshalJSON encodes the node.
func (n *Node) MarshalJSON() ([]byte, error) {
	return json.Marshal(nodeJSON{
		ID: n.ID, Kind: n.Kind, Pos: n.Pos, Doc: n.Doc, Tool: n.Tool, Flow: n.Flow, Args: n.Args,
		Next: n.Next, Error: n.Error, Retries: n.Retries, AtMostOnce: n.AtMostOnce, MaxVisits: n.MaxVisits,
		Timeout: jsonDuration(n.Timeout), Cost: n.Cost, Budget: n.Budget, Protected: n.Protected,
		Cond: n.Cond, Then: n.Then, Otherwise: n.Otherwise,
		Items: n.Items, Width: n.Width, Depth: n.Depth, MaxItems: n.MaxItems, Quorum: n.Quorum,
		Deadline: jsonDuration(n.Deadline), Grace: jsonDuration(n.Grace), Reduce: n.Reduce, Mature: n.Mature,
		ModelTool: n.ModelTool, Model: n.Model, System: n.System, Prompt: n.Prompt,
		Tools: n.Tools, Flows: n.Flows, Approve: n.Approve, MaxTurns: n.MaxTurns, MaxTokens: n.MaxTokens,
		OutputSchema: n.OutputSchema, OnExhausted: n.OnExhausted,
		OnUnknown: n.OnUnknown, UnknownTimeout: jsonDuration(n.UnknownTimeout), ApprovalTTL: jsonDuration(n.ApprovalTTL),
		RepeatLimit: n.RepeatLimit, ErrorLimit: n.ErrorLimit, OnRunaway: n.OnRunaway, OnBudget: n.OnBudget,
		Event: n.Event, Match: n.Match,
	})
}

// UnmarshalJSON decodes a node written by MarshalJSON.
func (n *Node) UnmarshalJSON(b []byte) error {
	var j nodeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*n = Node{
		ID: j.ID, Kind: j.Kind, Pos: j.Pos, Doc: j.Doc, Tool: j.Tool, Flow: j.Flow, Args: j.Args,
		Next: j.Next, Error: j.Error, Retries: j.Retries, AtMostOnce: j.AtMostOnce, MaxVisits: j.MaxVisits,
		Timeout: time.Duration(j.Timeout), Cost: j.Cost, Budget: j.Budget, Protected: j.Protected,
		Cond: j.Cond, Then: j.Then, Otherwise: j.Otherwise,
		Items: j.Items, Width: j.Width, Depth: j.Depth, MaxItems: j.MaxItems, Quorum: j.Quorum,
		Deadline: time.Duration(j.Deadline), Grace: time.Duration(j.Grace), Reduce: j.Reduce, Mature: j.Mature,
		ModelTool: j.ModelTool, Model: j.Model, System: j.System, Prompt: j.Prompt,
		Tools: j.Tools, Flows: j.Flows, Approve: j.Approve, MaxTurns: j.MaxTurns, MaxTokens: j.MaxTokens,
		OutputSchema: j.OutputSchema, OnExhausted: j.OnExhausted,
		OnUnknown: j.OnUnknown, UnknownTimeout: time.Duration(j.UnknownTimeout), ApprovalTTL: time.Duration(j.ApprovalTTL),
		RepeatLimit: j.RepeatLimit, ErrorLimit: j.ErrorLimit, OnRunaway: j.OnRunaway, OnBudget: j.OnBudget,
		Event: j.Event, Match: j.Match,
	}
	return nil
}

// MaxIRBytes bounds one flow's IR as the runtime stores it (its JSON). A
// registered version is one store record that every run of it loads, and
// the registration body is bounded too (8 MiB of source): a script that
// builds a graph far larger than its source is refused here, by the same
// check in flow check and at registration, rather than by the store.
const MaxIRBytes = 8 << 20
