package script

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/weirhq/weir/flows"
)

// Check loads files together and runs every static check with the default
// limits: each flow's graph, its tools against tools (nil: no catalog, so
// every tool is unknown — the tool check is never skipped), and subflow calls
// against the flows of the same files only. Registry.Check also resolves
// calls against registered flows.
func Check(files []flows.File, tools flows.Catalog) (*flows.Module, flows.Diagnostics) {
	return Loader{}.Check(files, tools)
}

// Check is the package-level Check with this loader's limits.
func (l Loader) Check(files []flows.File, tools flows.Catalog) (*flows.Module, flows.Diagnostics) {
	m, ds, _ := l.analyze(files, tools, nil, true)
	return m, ds
}

// lookupFunc finds the latest registered version of a flow; (nil, nil)
// when there is none.
type lookupFunc func(name string) (*flows.Flow, error)

func (l Loader) analyze(files []flows.File, tools flows.Catalog, lookup lookupFunc, full bool) (*flows.Module, flows.Diagnostics, error) {
	ls := l.run(files, false)
	for _, f := range ls.mod.Flows {
		ls.checkGraph(f)
		ls.checkIRSize(f)
		if full {
			ls.checkTools(f, tools)
		}
		ls.checkFanoutReads(f)
	}
	if full {
		if err := ls.checkCalls(lookup); err != nil {
			return nil, nil, err
		}
		if err := ls.checkDecls(lookup); err != nil {
			return nil, nil, err
		}
	}
	ls.diags = ls.diags.Sorted()
	return ls.mod, ls.diags, nil
}

// checkIRSize refuses a flow whose IR is larger than MaxIRBytes.
func (ls *loadState) checkIRSize(f *flows.Flow) {
	ir, err := json.Marshal(f)
	if err != nil {
		ls.addf(f.Pos, flows.CodeInvalid, nil, "flow %q: its graph cannot be encoded: %v", f.Name, err)
		return
	}
	if len(ir) > flows.MaxIRBytes {
		ls.addf(f.Pos, flows.CodeIRTooLarge, nil, "flow %q: its compiled graph is %d bytes, more than the %d bytes a flow may be (MaxIRBytes)", f.Name, len(ir), flows.MaxIRBytes)
	}
}

// checkGraph checks one flow on its own: every wire names a node, every
// node is reachable from the entry, and every cycle is bounded.
func (ls *loadState) checkGraph(f *flows.Flow) {
	idx := make(map[string]int, len(f.Nodes))
	for i, n := range f.Nodes {
		idx[n.ID] = i
	}
	succ := make([][]int, len(f.Nodes))
	// A misspelt wire would make its intended target look unreachable
	// too; reachability follows the suggested spelling instead, so one
	// typo is one diagnostic.
	var assumed [][2]int
	for i, n := range f.Nodes {
		n.EachWire(func(w flows.Wire) {
			j, ok := idx[w.To]
			if !ok {
				hint := ""
				if s := flows.Suggest(w.To, nodeIDs(f)); s != "" {
					hint = fmt.Sprintf(" (did you mean %q?)", s)
					assumed = append(assumed, [2]int{i, idx[s]})
				}
				ls.addf(n.ArgPos(w.Label), flows.CodeUnknownNode, nil, "%s %q: %s = %q names no node of flow %q%s", n.Kind, n.ID, w.Label, w.To, f.Name, hint)
				return
			}
			succ[i] = append(succ[i], j)
		})
	}
	if len(f.Nodes) == 0 {
		return
	}

	// Reachability from the entry node, along every wire.
	seen := make([]bool, len(f.Nodes))
	queue := []int{0}
	seen[0] = true
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		visit := func(j int) {
			if !seen[j] {
				seen[j] = true
				queue = append(queue, j)
			}
		}
		for _, j := range succ[i] {
			visit(j)
		}
		for _, e := range assumed {
			if e[0] == i {
				visit(e[1])
			}
		}
	}
	for i, n := range f.Nodes {
		if !seen[i] {
			ls.addf(n.Pos, flows.CodeUnreachable, nil, "%s %q: no wire of flow %q leads here from the entry node %q", n.Kind, n.ID, f.Name, f.Entry)
		}
	}

	// A cycle is bounded when a node on it declares max_visits: drop those
	// nodes and every cycle left is unbounded.
	inner := make([][]int, len(f.Nodes))
	for i, n := range f.Nodes {
		if n.MaxVisits > 0 {
			continue
		}
		inner[i] = succ[i]
		for k, j := range succ[i] {
			if f.Nodes[j].MaxVisits > 0 { // filter this list, copying it once
				kept := slices.Clone(succ[i][:k])
				for _, j := range succ[i][k:] {
					if f.Nodes[j].MaxVisits == 0 {
						kept = append(kept, j)
					}
				}
				inner[i] = kept
				break
			}
		}
	}
	for _, comp := range stronglyConnected(inner) {
		if !isCycle(comp, inner) {
			continue
		}
		start := slices.Min(comp) // the first declared node of the cycle
		path := cyclePath(start, comp, inner)
		chain := make([]string, len(path))
		for k, i := range path {
			chain[k] = f.Nodes[i].ID
		}
		n := f.Nodes[start]
		ls.addf(n.Pos, flows.CodeUnboundedCycle, chain, "flow %q: cycle %s has no node with max_visits; declare max_visits on one of its nodes to bound it", f.Name, flows.FormatChain(chain))
	}
}

func nodeIDs(f *flows.Flow) []string {
	ids := make([]string, len(f.Nodes))
	for i, n := range f.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// checkTools resolves every tool of a flow in the catalog and enforces
// at-most-once for tools that do not dedupe on an idempotency key (an
// agent's tools through checkAgent).
func (ls *loadState) checkTools(f *flows.Flow, tools flows.Catalog) {
	for _, n := range f.Nodes {
		if n.Kind == flows.KindAgent {
			ls.checkAgent(n, tools)
			continue
		}
		if n.Tool == "" {
			continue
		}
		info, ok := ls.lookupTool(n, n.Tool, n.ArgPos("tool"), tools)
		if !ok {
			continue
		}
		ls.checkConstArgs(n, info)
		if info.Idempotent || (n.AtMostOnce && n.Retries > 0) {
			continue // the contradiction is reported at load
		}
		switch {
		case n.Retries > 0:
			ls.addf(n.ArgPos("retries"), flows.CodeAtMostOnce, nil,
				"%s %q: tool %q is not idempotent, so retries = %d could run it twice; remove retries and declare at_most_once = True",
				n.Kind, n.ID, n.Tool, n.Retries)
		case !n.AtMostOnce:
			ls.addf(n.Pos, flows.CodeAtMostOnce, nil,
				"%s %q: tool %q is not idempotent; declare at_most_once = True to accept that an attempt whose outcome is unknown takes the error wire instead of running again",
				n.Kind, n.ID, n.Tool)
		}
	}
}

// lookupTool resolves a tool a node names at pos, reporting E_UNKNOWN_TOOL
// (with the closest installed name) when no plugin provides it.
func (ls *loadState) lookupTool(n *flows.Node, name string, pos flows.Pos, tools flows.Catalog) (flows.ToolInfo, bool) {
	if tools != nil {
		if info, ok := tools.LookupTool(name); ok {
			return info, true
		}
	}
	hint := ""
	if named, isNamed := tools.(flows.ToolLister); isNamed {
		if s := flows.Suggest(name, named.Names()); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
	}
	ls.addf(pos, flows.CodeUnknownTool, nil, "%s %q: no installed plugin provides tool %q%s", n.Kind, n.ID, name, hint)
	return flows.ToolInfo{}, false
}

// callGraph is the graph of subflow calls reachable from the flows being
// checked, resolved against them first and registered flows second.
type callGraph struct {
	flows []*flows.Flow
	local []bool
	index map[string]int
	edges [][]callEdge
}

type callEdge struct {
	to   int
	node *flows.Node // the subflow, fanout or agent node making the call
	pos  flows.Pos   // where the callee is named
}

// checkCalls checks subflow calls across flows: every callee resolves,
// no call cycle, no chain deeper than a flow's max_depth, and every fanout
// of flows declares a depth its children fit in. lookup may be nil.
func (ls *loadState) checkCalls(lookup lookupFunc) error {
	g := &callGraph{index: map[string]int{}}
	add := func(f *flows.Flow, local bool) int {
		g.index[f.Name] = len(g.flows)
		g.flows = append(g.flows, f)
		g.local = append(g.local, local)
		g.edges = append(g.edges, nil)
		return len(g.flows) - 1
	}
	for _, f := range ls.mod.Flows {
		add(f, true)
	}
	unresolved := map[int]bool{}
	for i := 0; i < len(g.flows); i++ { // g.flows grows as callees resolve
		f := g.flows[i]
		for _, n := range f.Calls() {
			for k, name := range n.Callees() {
				pos := n.ArgPos("flow")
				if n.Flow == "" {
					pos = n.ElemPos("flows", k)
				}
				j, ok := g.index[name]
				if !ok && lookup != nil {
					callee, err := lookup(name)
					if err != nil {
						return fmt.Errorf("resolving flow %q: %w", name, err)
					}
					if callee != nil {
						j, ok = add(callee, false), true
					}
				}
				if !ok {
					unresolved[i] = true
					if g.local[i] && !ls.incomplete {
						hint := ""
						if s := flows.Suggest(name, slices.Collect(mapKeys(g.index))); s != "" {
							hint = fmt.Sprintf(" (did you mean %q?)", s)
						}
						// Say what was searched: an offline check sees only
						// its files, a registration the registered flows too.
						where := "is among the files checked together"
						if lookup != nil {
							where = "is registered or among the files checked with it"
						}
						ls.addf(pos, flows.CodeUnknownFlow, nil, "%s %q: no flow named %q %s%s", n.Kind, n.ID, name, where, hint)
					}
					continue
				}
				g.edges[i] = append(g.edges[i], callEdge{to: j, node: n, pos: pos})
			}
		}
	}

	succ := make([][]int, len(g.flows))
	for i, es := range g.edges {
		for _, e := range es {
			succ[i] = append(succ[i], e.to)
		}
	}
	comps := stronglyConnected(succ)
	compOf := make([]int, len(g.flows))
	for c, comp := range comps {
		for _, i := range comp {
			compOf[i] = c
		}
	}

	// Cycles: every call from a flow being checked to a flow of its own
	// strongly connected component closes one; report each cycle once.
	reported := map[string]bool{}
	for i := range g.flows {
		if !g.local[i] {
			continue
		}
		for _, e := range g.edges[i] {
			if compOf[e.to] != compOf[i] {
				continue
			}
			path := shortestPath(e.to, i, comps[compOf[i]], succ)
			cycle := append([]int{i}, path...)
			key := canonicalCycle(cycle[:len(cycle)-1])
			if reported[key] {
				continue
			}
			reported[key] = true
			chain := g.names(cycle)
			ls.addf(e.pos, flows.CodeCycle, chain, "subflow cycle %s%s", flows.FormatChain(chain), offeredBy(e.node, g.flows[e.to].Name))
		}
	}

	// Depth: components come callees first, so each flow's depth is known
	// from its callees'. A flow on or above a cycle has no depth.
	const unknown = -1
	depth := make([]int, len(g.flows))
	best := make([]int, len(g.flows)) // edge index of the deepest call, or -1
	for _, comp := range comps {
		if isCycle(comp, succ) {
			for _, i := range comp {
				depth[i], best[i] = unknown, -1
			}
			continue
		}
		i := comp[0]
		depth[i], best[i] = 0, -1
		if unresolved[i] {
			depth[i] = unknown
			continue
		}
		for k, e := range g.edges[i] {
			if depth[e.to] == unknown {
				depth[i] = unknown
				break
			}
			if d := depth[e.to] + 1; d > depth[i] {
				depth[i], best[i] = d, k
			}
		}
	}
	chainBelow := func(i int) []int {
		path := []int{i}
		for depth[i] > 0 && best[i] >= 0 {
			i = g.edges[i][best[i]].to
			path = append(path, i)
		}
		return path
	}
	depths := map[string]int{}
	for i, f := range g.flows {
		if !g.local[i] || depth[i] == unknown {
			continue
		}
		depths[f.Name] = depth[i]
		if depth[i] > f.MaxDepth && f.MaxDepth >= 0 {
			chain := g.names(chainBelow(i))
			first := g.edges[i][best[i]]
			ls.addf(first.pos, flows.CodeDepth, chain, "flow %q nests subflows %d deep (%s), more than its max_depth = %d%s",
				f.Name, depth[i], flows.FormatChain(chain), f.MaxDepth, offeredBy(first.node, g.flows[first.to].Name))
		}
		for _, e := range g.edges[i] {
			n := e.node
			if n.Kind != flows.KindFanout || n.Depth <= 0 || depth[e.to] == unknown {
				continue
			}
			if need := depth[e.to] + 1; need > n.Depth {
				chain := append([]string{f.Name}, g.names(chainBelow(e.to))...)
				ls.addf(n.ArgPos("depth"), flows.CodeFanoutBounds, chain,
					"fanout %q: depth = %d, but its children delegate %d generations deep (%s)",
					n.ID, n.Depth, need, flows.FormatChain(chain))
			}
		}
	}
	ls.mod.SetDepths(depths)
	return nil
}

// offeredBy explains a call an agent makes: its model may start the flow.
func offeredBy(n *flows.Node, callee string) string {
	if n.Kind != flows.KindAgent {
		return ""
	}
	return fmt.Sprintf(" (agent %q offers flow %q to its model)", n.ID, callee)
}

func (g *callGraph) names(path []int) []string {
	out := make([]string, len(path))
	for k, i := range path {
		out[k] = g.flows[i].Name
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// canonicalCycle names a cycle independently of where it was entered:
// the rotation that starts at its smallest member.
func canonicalCycle(cycle []int) string {
	start := 0
	for k := range cycle {
		if cycle[k] < cycle[start] {
			start = k
		}
	}
	var b strings.Builder
	for k := range cycle {
		fmt.Fprintf(&b, "%d,", cycle[(start+k)%len(cycle)])
	}
	return b.String()
}

// stronglyConnected returns the strongly connected components of the graph
// with adjacency lists succ (Tarjan's algorithm, iterative so that deep
// graphs cannot exhaust the stack). Components come in reverse topological
// order: a component comes after every component it reaches. Each
// component's vertices are sorted.
func stronglyConnected(succ [][]int) [][]int {
	n := len(succ)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var (
		stack []int
		comps [][]int
		next  int
	)
	type frame struct{ v, k int }
	var call []frame
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		call = append(call[:0], frame{v: root})
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			fr := &call[len(call)-1]
			if fr.k < len(succ[fr.v]) {
				w := succ[fr.v][fr.k]
				fr.k++
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				case onStack[w]:
					low[fr.v] = min(low[fr.v], index[w])
				}
				continue
			}
			v := fr.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				parent := call[len(call)-1].v
				low[parent] = min(low[parent], low[v])
			}
			if low[v] == index[v] {
				k := len(stack) - 1
				for stack[k] != v {
					k--
				}
				comp := slices.Clone(stack[k:])
				for _, w := range comp {
					onStack[w] = false
				}
				stack = stack[:k]
				slices.Sort(comp)
				comps = append(comps, comp)
			}
		}
	}
	return comps
}

// isCycle reports whether a strongly connected component holds a cycle:
// more than one vertex, or one with an edge to itself.
func isCycle(comp []int, succ [][]int) bool {
	return len(comp) > 1 || slices.Contains(succ[comp[0]], comp[0])
}

// cyclePath returns a shortest cycle through start inside comp, as
// start, ..., start.
func cyclePath(start int, comp []int, succ [][]int) []int {
	if slices.Contains(succ[start], start) {
		return []int{start, start}
	}
	var best []int
	for _, w := range succ[start] {
		if _, in := slices.BinarySearch(comp, w); !in {
			continue
		}
		if p := shortestPath(w, start, comp, succ); p != nil && (best == nil || len(p) < len(best)) {
			best = p
		}
	}
	return append([]int{start}, best...)
}

// shortestPath returns the vertices of a shortest path from a to b that
// stays inside comp (sorted), a and b included (just [a] when a == b).
func shortestPath(a, b int, comp []int, succ [][]int) []int {
	if a == b {
		return []int{a}
	}
	prev := map[int]int{a: a}
	queue := []int{a}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range succ[v] {
			if _, in := slices.BinarySearch(comp, w); !in {
				continue
			}
			if _, seen := prev[w]; seen {
				continue
			}
			prev[w] = v
			if w == b {
				var path []int
				for x := b; x != a; x = prev[x] {
					path = append(path, x)
				}
				path = append(path, a)
				slices.Reverse(path)
				return path
			}
			queue = append(queue, w)
		}
	}
	return nil
}
