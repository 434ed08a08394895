package render

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/panics"
)

// Mark is what a run did at a node, for coloured pictures of a run.
type Mark string

// The marks of a run's graph.
const (
	MarkVisited Mark = "visited" // the node ran and the run moved on
	MarkCurrent Mark = "current" // the run is at the node now
	MarkWaiting Mark = "waiting" // the run is parked at the node
	MarkFailed  Mark = "failed"  // the node failed (its error wire was taken, or the run failed there)
	// MarkCancelled is the node the run was at when it was cancelled, or
	// one whose child run was: stopped by a person, not failed.
	MarkCancelled Mark = "cancelled"
)

// Graph formats.
const (
	FormatMermaid = "mermaid"
	FormatDot     = "dot"
	FormatSVG     = "svg"
)

// Render draws the flow's graph in format (mermaid, dot or svg). marks, if not
// nil, colours the nodes by what a run did there. Ok wires are solid,
// error wires dashed; a node with no outgoing wire ends the run.
//
// The flow is a user's, drawn for everyone who looks at it: a fault in a
// renderer on it is returned as a *panics.Error, never raised.
func Render(f *flows.Flow, format string, marks map[string]Mark) (out string, err error) {
	var render func(*flows.Flow, map[string]Mark) string
	switch format {
	case FormatMermaid:
		render = renderMermaid
	case FormatDot:
		render = renderDot
	case FormatSVG:
		render = renderSVG
	default:
		return "", fmt.Errorf("unknown graph format %q: use %s, %s or %s", format, FormatMermaid, FormatDot, FormatSVG)
	}
	err = panics.Catch(fmt.Sprintf("drawing flow %q", f.Name), func() error {
		out = render(f, marks)
		return nil
	})
	return out, err
}

// label is the text inside a node: its id and what it does.
func label(n *flows.Node) []string {
	lines := []string{n.ID}
	switch n.Kind {
	case flows.KindTask:
		lines = append(lines, "task "+n.Tool)
	case flows.KindSubflow:
		lines = append(lines, "subflow "+n.Flow)
	case flows.KindFanout:
		what := n.Tool
		if n.Flow != "" {
			what = "flow " + n.Flow
		}
		lines = append(lines, fmt.Sprintf("fanout %s ×≤%d width %d", what, n.MaxItems, n.Width))
	case flows.KindWait:
		lines = append(lines, "wait")
	case flows.KindBranch:
		lines = append(lines, "branch")
	case flows.KindAgent:
		lines = append(lines, agentLabel(n)...)
	}
	if n.MaxVisits > 0 {
		lines = append(lines, fmt.Sprintf("max_visits %d", n.MaxVisits))
	}
	return lines
}

// agentLabel says what an agent may do: its model, the tools and flows
// it may call (a ✋ marks tools a person approves), and its turn bound.
func agentLabel(n *flows.Node) []string {
	model := n.ModelTool
	if n.Model != "" {
		model = n.Model + " via " + n.ModelTool
	}
	lines := []string{fmt.Sprintf("agent %s ≤%d turns", model, n.MaxTurns)}
	if len(n.Tools) > 0 {
		tools := make([]string, len(n.Tools))
		for i, t := range n.Tools {
			tools[i] = t
			if slices.Contains(n.Approve, t) {
				tools[i] += " ✋"
			}
		}
		lines = append(lines, "tools: "+strings.Join(tools, ", "))
	}
	if len(n.Flows) > 0 {
		lines = append(lines, "flows: "+strings.Join(n.Flows, ", "))
	}
	return lines
}

var markColours = map[Mark]string{
	MarkVisited:   "#c8e6c9",
	MarkCurrent:   "#bbdefb",
	MarkWaiting:   "#fff59d",
	MarkFailed:    "#ffcdd2",
	MarkCancelled: "#cfd8dc",
}

func sortedMarks(marks map[string]Mark) []string {
	ids := make([]string, 0, len(marks))
	for id := range marks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func mermaidID(id string) string { return "n_" + strings.ReplaceAll(id, "-", "_") }

func renderMermaid(f *flows.Flow, marks map[string]Mark) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flowchart TD\n")
	shape := func(n *flows.Node, text string) string {
		switch n.Kind {
		case flows.KindBranch:
			return "{" + text + "}"
		case flows.KindWait:
			return "([" + text + "])"
		case flows.KindSubflow:
			return "[[" + text + "]]"
		case flows.KindFanout:
			return "[/" + text + "/]"
		case flows.KindAgent:
			return "{{" + text + "}}"
		}
		return "[" + text + "]"
	}
	for _, n := range f.Nodes {
		text := `"` + strings.ReplaceAll(strings.Join(label(n), "<br/>"), `"`, "'") + `"`
		fmt.Fprintf(&b, "  %s%s\n", mermaidID(n.ID), shape(n, text))
	}
	for _, n := range f.Nodes {
		for _, w := range n.Wires() {
			arrow := "-->"
			if w.Label == "error" {
				arrow = "-.->"
			}
			fmt.Fprintf(&b, "  %s %s|%s| %s\n", mermaidID(n.ID), arrow, w.Label, mermaidID(w.To))
		}
	}
	for _, m := range []Mark{MarkVisited, MarkCurrent, MarkWaiting, MarkFailed, MarkCancelled} {
		fmt.Fprintf(&b, "  classDef %s fill:%s\n", m, markColours[m])
	}
	for _, id := range sortedMarks(marks) {
		if f.Node(id) != nil {
			fmt.Fprintf(&b, "  class %s %s\n", mermaidID(id), marks[id])
		}
	}
	return b.String()
}

func renderDot(f *flows.Flow, marks map[string]Mark) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n  node [shape=box, style=rounded];\n", f.Name)
	shapes := map[flows.NodeKind]string{flows.KindBranch: "diamond", flows.KindWait: "ellipse", flows.KindSubflow: "box3d", flows.KindFanout: "parallelogram", flows.KindAgent: "hexagon"}
	for _, n := range f.Nodes {
		attrs := []string{fmt.Sprintf("label=%q", strings.Join(label(n), "\n"))}
		if s, ok := shapes[n.Kind]; ok {
			attrs = append(attrs, "shape="+s)
		}
		if m, ok := marks[n.ID]; ok {
			attrs = append(attrs, `style="rounded,filled"`, fmt.Sprintf("fillcolor=%q", markColours[m]))
		}
		fmt.Fprintf(&b, "  %q [%s];\n", n.ID, strings.Join(attrs, ", "))
	}
	for _, n := range f.Nodes {
		for _, w := range n.Wires() {
			style := ""
			if w.Label == "error" {
				style = ", style=dashed"
			}
			fmt.Fprintf(&b, "  %q -> %q [label=%q%s];\n", n.ID, w.To, w.Label, style)
		}
	}
	b.WriteString("}\n")
	return b.String()
}
