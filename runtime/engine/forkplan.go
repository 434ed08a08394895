package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/store"
)

// forkPlan is what a fork copies of its source (fork.go's notes give the
// rules): the continuation the fork starts with, which nodes' results it
// carries and which it could not, and the agent visits whose turns it
// copies.
type forkPlan struct {
	cont *continuation
	// copied are the nodes whose results the fork carries; notCopied the
	// nodes that completed before the point and again after it.
	copied, notCopied []string
	// visited are the nodes visited before the point without a result
	// carried (failed, branches): the compatibility check covers them too.
	visited     []string
	agentVisits []nodeVisit
}

type nodeVisit struct {
	node  string
	visit int
}

// nodeEnd is one visit's end on a run's timeline and the wire it took.
type nodeEnd struct {
	node      string
	completed bool
	to        string
}

// planFork decides what a fork of the run whose flow is f, whose
// continuation is cont and whose timeline is evs copies when it starts at
// node's visit-th visit. It refuses (E_FORK_POINT) a node f lacks, a
// visit the run never began, and a timeline that does not follow f.
func planFork(f *flows.Flow, cont *continuation, evs []*store.Event, node string, visit int) (*forkPlan, error) {
	if f.Node(node) == nil {
		return nil, protocolErr(CodeForkPoint, "flow %s has no node %q%s", f.Name, textbound.Quote(node), nodeHint(f, node))
	}
	if visit < 1 {
		return nil, protocolErr(CodeForkPoint, "the run never reached node %s: there is no visit of it to fork from", node)
	}
	ends, err := nodeEnds(f, evs)
	if err != nil {
		return nil, err
	}
	cut, visits, ok := findForkPoint(f, ends, node, visit)
	if !ok {
		return nil, protocolErr(CodeForkPoint, "the run reached node %s %d time(s), not %d: fork from %s@1 to %s@%d",
			node, visits[node], visit, node, node, max(visits[node], 1))
	}
	return copyBefore(f, cont, ends, cut, node, visits), nil
}

// nodeHint suggests the node of f closest to a misspelt one.
func nodeHint(f *flows.Flow, node string) string {
	ids := make([]string, len(f.Nodes))
	for i, n := range f.Nodes {
		ids[i] = n.ID
	}
	if s := flows.Suggest(node, ids); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// nodeEnds reads the visits' ends from a timeline, each with the wire it
// took: a failure's and a branch's are on the event, a completion's is
// the node's next.
func nodeEnds(f *flows.Flow, evs []*store.Event) ([]nodeEnd, error) {
	var ends []nodeEnd
	for _, ev := range evs {
		if ev.Type != evNodeDone && ev.Type != evNodeFailed {
			continue
		}
		n := f.Node(ev.Node)
		if n == nil {
			return nil, protocolErr(CodeForkPoint, "the run's timeline names node %q, which its flow version lacks", textbound.Quote(ev.Node))
		}
		end := nodeEnd{node: n.ID, completed: ev.Type == evNodeDone, to: n.Next}
		if wire, ok := ev.Detail["wire"].(string); ok && (!end.completed || n.Kind == flows.KindBranch) {
			end.to = wire
		} else if !end.completed {
			end.to = n.Error
		}
		ends = append(ends, end)
	}
	return ends, nil
}

// findForkPoint follows the ends from f's entry and returns how many of
// them came before node's visit-th visit began, and the visit counters
// then (that visit included); ok is false when the run never began it.
func findForkPoint(f *flows.Flow, ends []nodeEnd, node string, visit int) (int, map[string]int, bool) {
	visits := map[string]int{f.Entry: 1}
	if node == f.Entry && visit == 1 {
		return 0, visits, true
	}
	for i, end := range ends {
		if end.to == "" {
			break
		}
		visits[end.to]++
		if end.to == node && visits[node] == visit {
			return i + 1, visits, true
		}
	}
	return 0, visits, false
}

// copyBefore builds the fork's continuation from the ends before cut and
// the source's kept results and errors.
func copyBefore(f *flows.Flow, cont *continuation, ends []nodeEnd, cut int, node string, visits map[string]int) *forkPlan {
	plan := &forkPlan{cont: &continuation{V: continuationVersion, Node: node, Results: map[string]json.RawMessage{}, Visits: visits}}
	okAfter, failedAfter := map[string]bool{}, map[string]bool{}
	for _, end := range ends[cut:] {
		okAfter[end.node] = okAfter[end.node] || end.completed
		failedAfter[end.node] = failedAfter[end.node] || !end.completed
	}
	ended := map[string]int{}
	var last string
	seen := map[string]bool{}
	for _, end := range ends[:cut] {
		ended[end.node]++
		seen[end.node] = true
		if end.completed {
			last = end.node
		}
	}
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		r, hasResult := cont.Results[id]
		switch {
		case hasResult && okAfter[id]:
			plan.notCopied = append(plan.notCopied, id)
		case hasResult:
			plan.cont.Results[id] = r
			plan.copied = append(plan.copied, id)
		default:
			plan.visited = append(plan.visited, id)
		}
		if e := cont.Errors[id]; e != nil && !failedAfter[id] {
			if plan.cont.Errors == nil {
				plan.cont.Errors = map[string]*store.RunError{}
			}
			plan.cont.Errors[id] = e
		}
		if n := f.Node(id); n != nil && n.Kind == flows.KindAgent {
			for v := 1; v <= ended[id]; v++ {
				plan.agentVisits = append(plan.agentVisits, nodeVisit{id, v})
			}
		}
	}
	if _, ok := plan.cont.Results[last]; ok {
		plan.cont.Last = last
	}
	return plan
}
