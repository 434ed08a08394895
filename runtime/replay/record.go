package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// Daemon is what Record reads of a daemon: the run, its version's
// sources, its timeline and its journal, as any client of the API reads
// them (*client.Client is one).
type Daemon interface {
	RunGet(ctx context.Context, id string) (*apitypes.Run, error)
	FlowSourceAt(ctx context.Context, name, hash string) (*apitypes.FlowSource, error)
	RunEventsAll(ctx context.Context, id string, p client.EventListParams) iter.Seq2[apitypes.Event, error]
	RunJournal(ctx context.Context, id string) (*apitypes.RunJournal, error)
}

// Record reads run id from d and makes its recording, with the fields
// at redact (JSON pointers, Redact) blanked.
func Record(ctx context.Context, d Daemon, id string, redact []string, now time.Time) (*Recording, error) {
	pointers, err := parsePointers(redact)
	if err != nil {
		return nil, err
	}
	run, err := d.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if !run.Phase.Terminal() && run.Phase != apitypes.PhaseWaiting {
		return nil, &Error{Code: CodeNotSettled, Message: fmt.Sprintf("run %s is %s: record it once it has ended or parks on a wait (weir run wait %s)", id, run.Phase, id)}
	}
	src, err := d.FlowSourceAt(ctx, run.Flow, run.Version)
	if err != nil {
		return nil, err
	}
	var evs []apitypes.Event
	size := 0
	for ev, err := range d.RunEventsAll(ctx, id, client.EventListParams{}) {
		if err != nil {
			return nil, err
		}
		if size += eventSize(ev); size > maxBytes {
			return nil, &Error{Code: CodeTooLarge, Message: fmt.Sprintf("the timeline of run %s is more than %d bytes: too large to record", id, maxBytes)}
		}
		evs = append(evs, ev)
	}
	j, err := d.RunJournal(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, err := Build(run, src.Files, evs, j, now)
	if err != nil {
		return nil, err
	}
	rec.redact(pointers)
	return rec, nil
}

func eventSize(ev apitypes.Event) int {
	b, _ := json.Marshal(ev.Detail)
	return len(b) + 64
}

// Build makes the recording of run from its version's source files, its
// timeline and its journal.
func Build(run *apitypes.Run, files []apitypes.SourceFile, evs []apitypes.Event, j *apitypes.RunJournal, now time.Time) (*Recording, error) {
	rec := &Recording{RecordedAt: now.UTC(), Sources: files, Tools: j.Tools,
		Run: Run{ID: run.ID, Flow: run.Flow, Version: run.Version, Phase: string(run.Phase), Input: run.Input, Output: run.Output,
			Error: run.Error, Budget: run.Budget, Spent: run.Spent, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}}
	b := newBuilder(rec)
	for _, ev := range evs {
		if err := b.event(ev); err != nil {
			return nil, err
		}
	}
	for _, raw := range j.Turns {
		if err := b.turn(raw); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// builder follows a timeline in order: the visit each event belongs to
// is the node's ends so far, plus one.
type builder struct {
	rec       *Recording
	ended     map[string]int    // node visits ended so far, by node
	tries     map[string]int    // failed tries so far, by call key
	modelTool map[string]string // an agent node's model tool, from its turn events
	// answeredBy is who answered a model turn (the provider's model id
	// and the provider), by the turn's call key, from its event.
	answeredBy map[string][2]string
	// lastTry is the last failed try of a call that was retried, by key.
	lastTry map[string]Call
}

func newBuilder(rec *Recording) *builder {
	return &builder{rec: rec, ended: map[string]int{}, tries: map[string]int{}, modelTool: map[string]string{},
		answeredBy: map[string][2]string{}, lastTry: map[string]Call{}}
}

// beforeAnyCall are the codes a task's visit fails with before its call
// is made (or with no answer to keep): no try of the call is recorded for
// them.
var beforeAnyCall = map[string]bool{
	engine.CodeCallable: true, engine.CodeBudgetExhausted: true, engine.CodeUnknownTool: true, engine.CodeScriptLimit: true,
	engine.CodeMaxVisits: true, engine.CodeQueueTimeout: true, engine.CodeAttemptsExceeded: true, engine.CodeCancelled: true,
	engine.CodeFlowUnreadable: true, engine.CodeContinuation: true, engine.CodeResultTooLarge: true,
}

// failedCall records the last try of a call whose visit failed with the
// call's error: a permanent failure, the last of retried failures
// (E_RETRIES_EXHAUSTED: answered as the tries before it were), or an
// at-most-once call whose answer was lost (E_OUTCOME_UNKNOWN). A visit of
// a node that calls no tool never asks for it.
func (b *builder) failedCall(st Step) {
	if beforeAnyCall[st.Code] {
		return
	}
	key := callKey(st.Node, st.Visit, nil)
	c := Call{Node: st.Node, Visit: st.Visit, Try: b.tries[key] + 1, At: st.At}
	switch st.Code {
	case engine.CodeRetriesExhausted:
		last, ok := b.lastTry[key]
		if !ok {
			return
		}
		c.Tool, c.Error = last.Tool, last.Error
	case engine.CodeOutcomeUnknown:
		c.Error = &CallError{Kind: "unknown", Message: st.Message}
	default:
		c.Error = errorOf(st.Code, st.Message, false)
	}
	b.rec.Calls = append(b.rec.Calls, c)
}

func (b *builder) visit(node string) int { return b.ended[node] + 1 }

func (b *builder) event(ev apitypes.Event) error {
	switch ev.Type {
	case "node_completed", "node_failed":
		visit := b.visit(ev.Node)
		b.ended[ev.Node] = visit
		st := Step{Seq: ev.Seq, At: ev.At, Node: ev.Node, Visit: visit, Completed: ev.Type == "node_completed",
			Wire: str(ev.Detail["wire"]), Code: str(ev.Detail["code"]), Message: str(ev.Detail["message"])}
		b.rec.Steps = append(b.rec.Steps, st)
		if !st.Completed {
			b.failedCall(st)
		}
		if tool := str(ev.Detail["tool"]); st.Completed && tool != "" {
			if _, ok := ev.Detail["output"]; !ok {
				return &Error{Code: CodeFormat, Message: fmt.Sprintf("run %s: node %s's end has no output on its event: it ran on a weir that journaled no answers, and cannot be recorded", b.rec.Run.ID, ev.Node)}
			}
			key := callKey(ev.Node, visit, nil)
			b.rec.Calls = append(b.rec.Calls, Call{Node: ev.Node, Visit: visit, Try: b.tries[key] + 1, Tool: tool,
				Args: raw(ev.Detail["args"]), Output: raw(ev.Detail["output"]), Cost: num(ev.Detail["cost"]), At: ev.At})
		}
	case "retry_scheduled":
		index := indexOf(ev.Detail)
		visit := b.visit(ev.Node)
		key := callKey(ev.Node, visit, index)
		b.tries[key]++
		c := Call{Node: ev.Node, Visit: visit, Index: index, Try: b.tries[key], Tool: str(ev.Detail["tool"]),
			Error: errorOf(str(ev.Detail["code"]), str(ev.Detail["message"]), true), At: ev.At}
		b.rec.Calls = append(b.rec.Calls, c)
		b.lastTry[key] = c
	case "item_done":
		b.item(ev)
	case "agent_turn":
		b.modelTool[ev.Node] = str(ev.Detail["model_tool"])
		key := callKey(ev.Node, b.visit(ev.Node), []int{int(num(ev.Detail["turn"]))})
		b.answeredBy[key] = [2]string{str(ev.Detail["response_model"]), str(ev.Detail["provider"])}
	case "approved", "rejected", "responded":
		b.rec.Decisions = append(b.rec.Decisions, Decision{Node: ev.Node, Wait: str(ev.Detail["wait"]), Kind: str(ev.Detail["kind"]),
			Approved: ev.Type != "rejected", Respond: ev.Type == "responded", Payload: raw(ev.Detail["payload"]), Reason: str(ev.Detail["reason"]), At: ev.At})
	}
	return nil
}

// item records the answer of a tool fan-out's item, from its end (a
// failure the engine decided before any call is answered only if the
// replay does call). The fan-out's node names the tool, so the end does
// not: an item's call is not checked for its tool.
func (b *builder) item(ev apitypes.Event) {
	if str(ev.Detail["task"]) == "" {
		return // a child run's end: its calls are the child's
	}
	_, answered := ev.Detail["output"]
	code := str(ev.Detail["code"])
	visit, index := b.visit(ev.Node), []int{int(num(ev.Detail["item"]))}
	key := callKey(ev.Node, visit, index)
	c := Call{Node: ev.Node, Visit: visit, Index: index, Try: b.tries[key] + 1, Args: raw(ev.Detail["args"]), At: ev.At}
	switch {
	case answered:
		c.Output = raw(ev.Detail["output"])
	case code != "":
		c.Error = errorOf(code, str(ev.Detail["message"]), false)
	default:
		return
	}
	b.rec.Calls = append(b.rec.Calls, c)
}

// turn records a model turn's answer and the answers of the calls it
// asked for.
func (b *builder) turn(data json.RawMessage) error {
	var t store.AgentTurn
	if err := json.Unmarshal(data, &t); err != nil {
		return &Error{Code: CodeFormat, Message: "a journaled turn is not one: " + err.Error()}
	}
	b.rec.Turns = append(b.rec.Turns, data)
	msg := messageOf(t.Response)
	key := callKey(t.Node, t.Visit, []int{t.Turn})
	by := b.answeredBy[key]
	resp, err := json.Marshal(chat.Response{Message: msg, StopReason: chat.StopReason(t.StopReason),
		Usage: chat.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens}, UsageEstimated: !t.UsageReported,
		Model: by[0], Provider: by[1]})
	if err != nil {
		return err
	}
	b.rec.Calls = append(b.rec.Calls, Call{Node: t.Node, Visit: t.Visit, Index: []int{t.Turn}, Try: b.tries[key] + 1,
		Tool: b.modelTool[t.Node], ArgsSHA256: t.RequestDigest, Output: resp, Cost: t.Cost, At: t.At})
	for i, c := range t.Calls {
		b.decidedCall(engine.WaitID(t.Node, t.Visit, t.Turn, i), c)
		if !c.Done || c.Responded || c.Child != "" {
			continue // no tool answered it: a person did, or a child run
		}
		index := []int{t.Turn, i}
		call := Call{Node: t.Node, Visit: t.Visit, Index: index, Try: b.tries[callKey(t.Node, t.Visit, index)] + 1, Tool: c.Tool,
			Args: callArgs(msg, i, c), Cost: c.Cost, At: t.At}
		if c.Error != nil {
			call.Error = errorOf(c.Error.Code, c.Error.Message, false)
		} else {
			call.Output = c.Result
		}
		b.rec.Calls = append(b.rec.Calls, call)
	}
	return nil
}

// decidedCall completes the decision on an agent's proposed call from
// its turn, which keeps what the event gives only a digest of: the edited
// arguments, or the person's answer.
func (b *builder) decidedCall(wait string, c store.AgentCall) {
	for i := range b.rec.Decisions {
		d := &b.rec.Decisions[i]
		if d.Wait != wait {
			continue
		}
		switch {
		case d.Respond:
			d.Result = c.Result
		case d.Approved && len(c.Edited) > 0:
			d.Payload = c.Edited
		}
	}
}

// callArgs are the arguments the model gave call i of its answer, or
// those a person's edit replaced them with.
func callArgs(msg chat.Message, i int, c store.AgentCall) json.RawMessage {
	if len(c.Edited) > 0 {
		return c.Edited
	}
	if i < len(msg.ToolCalls) {
		return msg.ToolCalls[i].Arguments
	}
	return nil
}

func messageOf(b json.RawMessage) chat.Message {
	var m chat.Message
	_ = json.Unmarshal(b, &m) // the store wrote it from a chat.Message
	return m
}

// errorOf is the failure a try was told, from the run error it became:
// a code named after a failure's kind gives the kind back.
func errorOf(code, message string, retryable bool) *CallError {
	e := &CallError{Kind: "permanent", Code: code, Message: message}
	if retryable {
		e.Kind = "retryable"
	}
	if kind, ok := strings.CutPrefix(code, "E_TOOL_"); ok {
		e.Kind, e.Code = strings.ToLower(kind), ""
	}
	return e
}

// callKey names one logical call, as its idempotency key does without
// the run: node, visit and the index inside the node.
func callKey(node string, visit int, index []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", node, visit)
	for _, i := range index {
		fmt.Fprintf(&b, "/%d", i)
	}
	return b.String()
}

// indexOf is a call's index inside its node as its events spell it.
func indexOf(d map[string]any) []int {
	if t, ok := d["turn"]; ok {
		index := []int{int(num(t))}
		if c, ok := d["call"]; ok {
			index = append(index, int(num(c)))
		}
		return index
	}
	if it, ok := d["item"]; ok {
		return []int{int(num(it))}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

// raw is a detail's value as JSON (nil when absent).
func raw(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if r, ok := v.(json.RawMessage); ok {
		return r
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
