package script

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weirhq/weir/flows"
	"go.starlark.net/starlark"
)

// An agent is a bounded loop the IR declares: model turn, the tool calls it
// asks for, model turn, ... at most max_turns turns. The model chooses
// among tools the flow declared, so everything it may do is checked here
// like any task's tool: dynamic choice, static bounds.

// DefaultModelTool is the chat tool an agent's turns call when the script
// gives a model alias and no model_tool: the first-party llm plugin's.
const DefaultModelTool = "llm.chat"

// MaxAgentTurns is the largest max_turns an agent may declare. A loop that
// needs more turns is better split into nodes a reader can see.
const MaxAgentTurns = 100

// stringList unpacks a list (or tuple) of strings, or None (absent).
type stringList struct {
	list []string
	set  bool
}

func (l *stringList) Unpack(v starlark.Value) error {
	if v == starlark.None {
		return nil
	}
	elems, ok := sequenceElems(v)
	if !ok {
		return fmt.Errorf("got %s, want a list of strings", v.Type())
	}
	l.list, l.set = make([]string, len(elems)), true
	for i, e := range elems {
		s, ok := e.(starlark.String)
		if !ok {
			return fmt.Errorf("element %d is a %s, want a string", i, e.Type())
		}
		l.list[i] = string(s)
	}
	return nil
}

// agent(id, prompt, model | model_tool, system, tools, flows, approve,
// max_turns, max_tokens, output, at_most_once, next, error, max_visits,
// timeout, cost, protected, doc, on_unknown, unknown_timeout, approval_ttl,
// repeat_limit, error_limit, on_runaway, on_budget)
func builtinAgent(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		p                         nodeParams
		prompt, system, output    starlark.Value
		model, modelTool          optString
		tools, flowNames, approve stringList
		maxTurns, maxTokens       optInt
		unknown                   unknownParams
		approvalTTL               optString
		repeatLimit, errorLimit   optInt
		onRunaway, onBudget       optString
	)
	nb, err := startNode(thread, b, args, kwargs, flows.KindAgent, &p,
		"id", &p.id, "prompt", &prompt, "model?", &model, "model_tool?", &modelTool, "system?", &system,
		"tools?", &tools, "flows?", &flowNames, "approve?", &approve,
		"max_turns?", &maxTurns, "max_tokens?", &maxTokens, "output?", &output,
		"at_most_once?", &p.atMostOnce, "next?", &p.next, "error?", &p.errw, "max_visits?", &p.maxVisits,
		"timeout?", &p.timeout, "cost?", &p.cost, "protected?", &p.protected, "doc?", &p.doc,
		"on_unknown?", &unknown.onUnknown, "unknown_timeout?", &unknown.timeout, "approval_ttl?", &approvalTTL,
		"repeat_limit?", &repeatLimit, "error_limit?", &errorLimit, "on_runaway?", &onRunaway, "on_budget?", &onBudget,
	)
	if err != nil {
		return nil, err
	}
	n := nb.n()
	nb.onUnknown(unknown)
	if !model.set && !modelTool.set {
		nb.addf("", flows.CodeInvalid, "needs model (a model alias of %s) or model_tool (a tool that speaks the chat contract)", DefaultModelTool)
	}
	nb.name("model_tool", modelTool, &n.ModelTool, "tool")
	nb.name("model", model, &n.Model, "model alias")
	if n.ModelTool == "" && n.Model != "" {
		n.ModelTool = DefaultModelTool
	}
	if prompt == starlark.None {
		nb.addf("prompt", flows.CodeInvalid, "prompt must be a function called as prompt(ctx), or a constant string")
	}
	nb.value(prompt, specPrompt)
	nb.value(system, specSystem)

	n.Tools = nb.names("tools", tools, "tool")
	n.Flows = nb.names("flows", flowNames, "flow")
	n.Approve = nb.names("approve", approve, "tool")
	for i, t := range n.Approve {
		if slices.Contains(n.Tools, t) {
			continue
		}
		hint := ""
		if s := flows.Suggest(t, n.Tools); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		nb.addfAt(n.ElemPos("approve", i), flows.CodeInvalid, "approve names %q, which is not in tools%s; approve says which of the agent's tools wait for a person, so add it to tools", t, hint)
	}
	if approvalTTL.set && len(n.Approve) == 0 {
		nb.addf("approval_ttl", flows.CodeInvalid, "approval_ttl = %q bounds the approval waits of the tools in approve, and this agent approves none", approvalTTL.s)
	} else {
		nb.duration("approval_ttl", approvalTTL, &n.ApprovalTTL)
	}
	nb.modelNames()
	nb.runawayGuard(repeatLimit, errorLimit, onRunaway)
	if checkOnBudget(onBudget, func(format string, args ...any) { nb.addf("on_budget", flows.CodeInvalid, format, args...) }) {
		nb.nv.onBudget = onBudget.s
	}

	switch {
	case !maxTurns.set:
		nb.addf("", flows.CodeAgentBounds, "must declare max_turns (the most model turns, 1 to %d), a constant", MaxAgentTurns)
	case maxTurns.n < 1 || maxTurns.n > MaxAgentTurns:
		nb.addf("max_turns", flows.CodeAgentBounds, "max_turns = %d, must be between 1 and %d", maxTurns.n, MaxAgentTurns)
	default:
		n.MaxTurns = maxTurns.n
	}
	if maxTokens.set {
		if maxTokens.n <= 0 {
			nb.addf("max_tokens", flows.CodeAgentBounds, "max_tokens = %d, must be positive (leave it out for the model's own limit)", maxTokens.n)
		} else {
			n.MaxTokens = maxTokens.n
		}
	}
	if output != nil && output != starlark.None {
		if schema, code, msg := inputSchemaOf(output); msg != "" {
			nb.addf("output", code, "output %s", msg)
		} else {
			n.OutputSchema = schema
		}
	}
	return nb.record(&p), nil
}

// runawayGuard checks an agent's repeat_limit and error_limit (constants
// from 2 to flows.MaxRunawayLimit: a limit of 1 would trip on every call)
// and on_runaway ("ask" or "fail"), and sets them on the node.
func (nb *nodeBuilder) runawayGuard(repeatLimit, errorLimit optInt, onRunaway optString) {
	n := nb.n()
	limit := func(param string, v optInt, def int, dst *int) {
		if !v.set {
			return
		}
		if v.n < 2 || v.n > flows.MaxRunawayLimit {
			nb.addf(param, flows.CodeAgentBounds, "%s = %d, must be between 2 and %d (leave it out for the default, %d)",
				param, v.n, flows.MaxRunawayLimit, def)
			return
		}
		*dst = v.n
	}
	limit("repeat_limit", repeatLimit, flows.DefaultRepeatLimit, &n.RepeatLimit)
	limit("error_limit", errorLimit, flows.DefaultErrorLimit, &n.ErrorLimit)
	if checkChoice("on_runaway", onRunaway, func(format string, args ...any) { nb.addf("on_runaway", flows.CodeInvalid, format, args...) },
		choice{flows.OnRunawayAsk, "park the run until a person resumes it"},
		choice{flows.OnRunawayFail, "take the error wire with E_AGENT_RUNAWAY"}) {
		n.OnRunaway = onRunaway.s
	}
}

func (nb *nodeBuilder) addfAt(pos flows.Pos, code flows.Code, format string, args ...any) {
	prefix := fmt.Sprintf("%s %q: ", nb.n().Kind, nb.n().ID)
	nb.ls.addf(pos, code, nil, prefix+format, args...)
}

// names records a list of tool or flow names, refusing empty and repeated
// entries.
func (nb *nodeBuilder) names(param string, l stringList, what string) []string {
	if !l.set {
		return nil
	}
	out := make([]string, 0, len(l.list))
	for i, s := range l.list {
		pos := nb.n().ElemPos(param, i)
		switch {
		case s == "":
			nb.addfAt(pos, flows.CodeInvalid, "%s[%d] = \"\" names no %s", param, i, what)
		case slices.Contains(out, s):
			nb.addfAt(pos, flows.CodeDuplicate, "%s names %s %q twice", param, what, s)
		default:
			out = append(out, s)
		}
	}
	return out
}

// modelNames checks that the tools and flows the agent offers its model
// reach it under names the providers accept and that map back to one
// tool or flow each.
func (nb *nodeBuilder) modelNames() {
	n := nb.n()
	type offer struct{ what, name string }
	seen := map[string]offer{}
	check := func(param, what string, names []string) {
		for i, name := range names {
			m, err := flows.ModelToolName(name)
			if err != nil {
				nb.addfAt(n.ElemPos(param, i), flows.CodeToolNameCollision, "%s %q: %v", what, name, err)
				continue
			}
			if prev, dup := seen[m]; dup {
				nb.addfAt(n.ElemPos(param, i), flows.CodeToolNameCollision,
					"%s %q and %s %q both reach the model as %q; offer only one of them", what, name, prev.what, prev.name, m)
				continue
			}
			seen[m] = offer{what, name}
		}
	}
	check("tools", "tool", n.Tools)
	check("flows", "flow", n.Flows)
}

// checkAgent resolves an agent's model tool and tools in the catalog: the
// model tool speaks the chat contract and offers the model alias, and
// every tool the model may call without a person is idempotent or the
// node accepts at-most-once.
func (ls *loadState) checkAgent(n *flows.Node, tools flows.Catalog) {
	if n.ModelTool != "" {
		pos := n.ArgPos("model_tool")
		if pos == n.Pos {
			pos = n.ArgPos("model")
		}
		if info, ok := ls.lookupTool(n, n.ModelTool, pos, tools); ok {
			ls.checkModel(n, info, pos, tools)
		}
	}
	for i, t := range n.Tools {
		pos := n.ElemPos("tools", i)
		info, ok := ls.lookupTool(n, t, pos, tools)
		if !ok || info.Idempotent || n.AtMostOnce || slices.Contains(n.Approve, t) {
			continue
		}
		ls.addf(pos, flows.CodeAtMostOnce, nil,
			"agent %q: tool %q is not idempotent; add it to approve (a person approves each call) or declare at_most_once = True (a call whose outcome is unknown is told to the model as unknown, never run again)",
			n.ID, t)
	}
}

func (ls *loadState) checkModel(n *flows.Node, info flows.ToolInfo, pos flows.Pos, tools flows.Catalog) {
	if !info.Chat {
		hint := ""
		if chat := chatTools(tools); len(chat) > 0 {
			hint = fmt.Sprintf("; installed chat tools: %s", strings.Join(chat, ", "))
		}
		ls.addf(pos, flows.CodeNotChat, nil, "agent %q: tool %q does not speak the chat contract, so it cannot take an agent's model turns%s", n.ID, n.ModelTool, hint)
		return
	}
	if !info.Idempotent && !n.AtMostOnce {
		ls.addf(pos, flows.CodeAtMostOnce, nil,
			"agent %q: model tool %q is not idempotent; declare at_most_once = True to accept that a turn whose outcome is unknown takes the error wire instead of being asked again",
			n.ID, n.ModelTool)
	}
	if n.Model == "" {
		return
	}
	m, ok := info.Model(n.Model)
	if !ok {
		aliases := info.ModelAliases()
		var hint string
		switch s := flows.Suggest(n.Model, aliases); {
		case s != "":
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		case len(aliases) > 0:
			hint = fmt.Sprintf("; it offers %s", strings.Join(aliases, ", "))
		default:
			hint = "; it declares no model aliases (configure them in its plugin's models)"
		}
		ls.addf(n.ArgPos("model"), flows.CodeUnknownModel, nil, "agent %q: tool %q offers no model %q%s", n.ID, n.ModelTool, n.Model, hint)
		return
	}
	if m.MaxTokens > 0 && n.MaxTokens > m.MaxTokens {
		ls.addf(n.ArgPos("max_tokens"), flows.CodeAgentBounds, nil, "agent %q: max_tokens = %d, more than model %q allows (%d)", n.ID, n.MaxTokens, n.Model, m.MaxTokens)
	}
}

// chatTools lists the catalog's tools that speak the chat contract, when
// the catalog can list its tools.
func chatTools(tools flows.Catalog) []string {
	named, ok := tools.(flows.ToolLister)
	if !ok {
		return nil
	}
	var out []string
	for _, name := range named.Names() {
		if info, ok := tools.LookupTool(name); ok && info.Chat {
			out = append(out, name)
		}
	}
	return out
}
