package flows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// EffectSite is one place a run may call an at_most_once tool: a fork or
// a replay that reaches it makes the call again, and nothing dedupes it.
type EffectSite struct {
	// Flow and Node name the node that calls the tool; Flow is a child
	// flow's name when the call is made by a run that a node starts.
	Flow string `json:"flow"`
	Node string `json:"node"`
	// Kind is the node's kind (task, fanout, agent).
	Kind NodeKind `json:"kind"`
	// Tool is the tool called; Pos is where the script names it.
	Tool string `json:"tool"`
	Pos  Pos    `json:"pos"`
	// Via is the node of the walked flow that starts the child run making
	// the call ("" for a call of the walked flow itself).
	Via string `json:"via,omitempty"`
	// Why says why the site counts when the tool's class is not simply
	// at_most_once (a tool no installed plugin declares).
	Why string `json:"why,omitempty"`
}

// String is the site as an operator reads it: file:line: node (tool).
func (s EffectSite) String() string {
	where := s.Flow + "." + s.Node
	if s.Via != "" {
		where += " (via " + s.Via + ")"
	}
	out := fmt.Sprintf("%s: %s calls %s", s.Pos, where, s.Tool)
	if s.Why != "" {
		out += " (" + s.Why + ")"
	}
	return out
}

// EffectLookup is what the fork walk reads besides the graph: each tool's
// class and each child flow's graph. Flow returns nil for a flow it does
// not have; its runs are then treated as may-effect.
type EffectLookup struct {
	Tool func(name string) (ToolInfo, bool)
	Flow func(name string) *Flow
}

// EffectSites walks f from node from and lists every node reachable from
// it (from included) that may call an at_most_once tool, in the order the
// walk meets them: a task whose tool is at_most_once, a fan-out whose
// item tool is, an agent whose model tool is or that may choose such a
// tool without a person (a tool of its Approve list waits for a person's
// approval before each call, so it needs no leave), and, walked whole from
// their entry, the flows that subflows, flow fan-outs and agents start. A
// tool no installed plugin declares counts as at_most_once: nothing says
// it may be repeated. read and idempotent tools are never sites. A child
// flow that lookup does not have is one site of its own (it may do
// anything).
func EffectSites(f *Flow, from string, lookup EffectLookup) []EffectSite {
	w := &effectWalk{lookup: lookup, flowsSeen: map[string]bool{f.Name: true}}
	w.walk(f, reachable(f, from), "")
	return w.sites
}

// Reachable lists the ids of the nodes of f reachable from node from
// along any wire, from included, in the order a breadth-first walk meets
// them; none when f has no such node.
func Reachable(f *Flow, from string) []string {
	nodes := reachable(f, from)
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

func reachable(f *Flow, from string) []*Node {
	start := f.Node(from)
	if start == nil {
		return nil
	}
	seen := map[string]bool{from: true}
	queue := []*Node{start}
	for i := 0; i < len(queue); i++ {
		queue[i].EachWire(func(w Wire) {
			if n := f.Node(w.To); n != nil && !seen[w.To] {
				seen[w.To] = true
				queue = append(queue, n)
			}
		})
	}
	return queue
}

type effectWalk struct {
	lookup    EffectLookup
	flowsSeen map[string]bool
	sites     []EffectSite
}

func (w *effectWalk) walk(f *Flow, nodes []*Node, via string) {
	for _, n := range nodes {
		if n.Tool != "" {
			w.tool(f, n, n.Tool, n.ArgPos("tool"), via)
		}
		if n.Kind == KindAgent {
			if n.ModelTool != "" {
				w.tool(f, n, n.ModelTool, n.ArgPos("model_tool"), via)
			}
			for i, t := range n.Tools {
				if !slices.Contains(n.Approve, t) {
					w.tool(f, n, t, n.ElemPos("tools", i), via)
				}
			}
		}
		for _, callee := range n.Callees() {
			w.child(f, n, callee, via)
		}
	}
}

func (w *effectWalk) tool(f *Flow, n *Node, name string, pos Pos, via string) {
	site := EffectSite{Flow: f.Name, Node: n.ID, Kind: n.Kind, Tool: name, Pos: pos, Via: via}
	info, ok := ToolInfo{}, false
	if w.lookup.Tool != nil {
		info, ok = w.lookup.Tool(name)
	}
	switch {
	case !ok:
		site.Why = "no installed plugin declares it: treated as at_most_once"
	case info.Class() != EffectAtMostOnce:
		return
	}
	w.sites = append(w.sites, site)
}

func (w *effectWalk) child(f *Flow, n *Node, callee, via string) {
	if w.flowsSeen[callee] {
		return // walked already (or the flow itself: a cycle)
	}
	w.flowsSeen[callee] = true
	if via == "" {
		via = f.Name + "." + n.ID
	}
	var cf *Flow
	if w.lookup.Flow != nil {
		cf = w.lookup.Flow(callee)
	}
	if cf == nil {
		w.sites = append(w.sites, EffectSite{Flow: f.Name, Node: n.ID, Kind: n.Kind, Tool: "flow " + callee, Pos: n.Pos, Via: via,
			Why: "the flow it starts cannot be read: its runs may call anything"})
		return
	}
	w.walk(cf, reachable(cf, cf.Entry), via)
}

// Misfit is one reason a run's position and results do not fit another
// version of its flow.
type Misfit struct {
	Node string `json:"node"`
	Why  string `json:"why"`
	// Schema says the misfit is only that the node is an agent whose
	// output_schema differs: the answer kept may still satisfy the new
	// one, which only the answer itself can say (a migration checks it).
	Schema bool `json:"schema,omitempty"`
}

func (m Misfit) String() string { return m.Node + ": " + m.Why }

// Compatible is the one compatibility check (DESIGN §12): whether a run
// of flow version old, positioned at node at (the node it runs next) and
// holding the kept work of the nodes done, fits version new, so that it
// may go on under new. It returns what does not fit, in a stable order;
// none means it fits. The rules:
//
//   - at exists in new, with the same kind as in old: the run resumes
//     there, so it must mean the same step.
//   - every node of done exists in new with the same kind, and what its
//     kept result was made by is the same: a task's or a fan-out's tool,
//     a subflow's or a flow fan-out's flow, an agent's output schema.
//     Later nodes read those results through ctx.results, so a result
//     made by another tool (or an agent answer of another shape) would be
//     read as something it is not.
//
// Arguments, wires, retries, timeouts and everything else a node declares
// may differ: they shape work still to be done, which new does anew.
func Compatible(old, new *Flow, at string, done []string) []Misfit {
	var out []Misfit
	if at != "" {
		if m, ok := fits(old, new, at, false); !ok {
			out = append(out, m)
		}
	}
	sorted := slices.Clone(done)
	slices.Sort(sorted)
	for _, id := range slices.Compact(sorted) {
		if id == at {
			continue
		}
		if m, ok := fits(old, new, id, true); !ok {
			out = append(out, m)
		}
	}
	return out
}

// CompatibleParked is Compatible for a run parked at node at (a wait, an
// unknown outcome, retries exhausted, its children or its budget) that
// holds the kept work of the nodes done and has open waits at the nodes
// waits, for registration's report on parked runs and for a migration
// (DESIGN §12). It adds to Compatible's rules what parking means: the
// node the run is parked at is mid-way (a fan-out's items, an agent's
// turns, an outcome or a wait already journaled), so what made that work
// must match as it must for a done node; and every node with an open wait
// must exist with the same kind, or the decision it waits for would have
// nowhere to go.
func CompatibleParked(old, new *Flow, at string, done, waits []string) []Misfit {
	held := append(slices.Clone(done), waits...)
	if at != "" {
		held = append(held, at)
	}
	out := Compatible(old, new, "", held)
	for i, m := range out {
		switch {
		case m.Node == at && new.Node(at) == nil:
			out[i].Why = "the run is parked at " + at + ", which the new version does not have"
		case slices.Contains(waits, m.Node) && new.Node(m.Node) == nil:
			out[i].Why = "the run has an open wait at " + m.Node + ", which the new version does not have"
		case m.Schema && m.Node != at:
			out[i].Why += " (a migration checks the run's own answer against it)"
		case m.Schema:
			out[i].Schema = false // mid-way: its turns were asked for the old schema
		}
	}
	return out
}

// fits checks node id of old against new; made says the node's kept
// result is carried over, so what made it must match too.
func fits(old, new *Flow, id string, made bool) (Misfit, bool) {
	o, n := old.Node(id), new.Node(id)
	switch {
	case n == nil:
		return Misfit{Node: id, Why: "the new version has no node " + id}, false
	case o == nil:
		return Misfit{Node: id, Why: "the run's own version has no node " + id}, false
	case o.Kind != n.Kind:
		return Misfit{Node: id, Why: fmt.Sprintf("a %s in the run's version, a %s in the new one", o.Kind, n.Kind)}, false
	case !made:
		return Misfit{}, true
	case o.Tool != n.Tool:
		return Misfit{Node: id, Why: fmt.Sprintf("its result was made by tool %q; the new version calls %q", o.Tool, n.Tool)}, false
	case o.Flow != n.Flow:
		return Misfit{Node: id, Why: fmt.Sprintf("its result was made by flow %q; the new version starts %q", o.Flow, n.Flow)}, false
	case o.Kind == KindAgent && !sameJSON(o.OutputSchema, n.OutputSchema):
		return Misfit{Node: id, Why: "its answer was checked against another output_schema than the new version declares", Schema: true}, false
	}
	return Misfit{}, true
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
