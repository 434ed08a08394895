package engine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// MaxJournalTurns bounds the model turns one Journal answer carries: more
// is a run too long to record (E_TOO_LARGE).
const MaxJournalTurns = 10_000

// CodeTooLarge refuses an answer larger than its bound.
const CodeTooLarge = "E_TOO_LARGE"

// Journal is what a recording of a run needs beyond what the engine
// serves already (the run, its timeline, its version's sources): the
// model turns its agents journaled, each with its request's digest, the
// model's answer and the ends of the calls it asked for, and the
// declarations of the tools the version calls, so that a replay can
// register the version with no plugin installed. What a tool declares is
// its manifest, never a plugin's config.
type Journal struct {
	Turns []*store.AgentTurn
	Tools []flows.ToolInfo
}

// Journal returns the journal of owner's run for a recording. Another
// owner's run is answered as a missing one (and audited, by Get).
func (o *Ops) Journal(ctx context.Context, owner, runID string) (*Journal, error) {
	e := o.e
	run, err := e.Get(ctx, owner, runID)
	if err != nil {
		return nil, err
	}
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if err != nil {
		return nil, &Error{Code: CodeFlowUnreadable, Class: ClassRun, Message: err.Error()}
	}
	j := &Journal{Tools: journalTools(ctx, e, fe.flow)}
	err = e.st.View(ctx, func(tx store.Tx) error {
		j.Turns = nil
		raw, err := tx.ContinuationGet(runID)
		if errors.Is(err, store.ErrNotFound) {
			return nil // accepted, never started: no turns yet
		}
		if err != nil {
			return err
		}
		c, err := decodeContinuation(raw)
		if err != nil {
			return err
		}
		return journalTurns(tx, fe.flow, runID, c.Visits, &j.Turns)
	})
	if errors.Is(err, errJournalTooLarge) {
		return nil, protocolErr(CodeTooLarge, "run %s journaled more than %d model turns: too many to record", runID, MaxJournalTurns)
	}
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	return j, nil
}

var errJournalTooLarge = errors.New("engine: journal too large")

// journalTurns appends the turns of every visit of f's agent nodes, in
// node order, then visit, then turn.
func journalTurns(tx store.Tx, f *flows.Flow, runID string, visits map[string]int, out *[]*store.AgentTurn) error {
	for _, n := range f.Nodes {
		if n.Kind != flows.KindAgent {
			continue
		}
		for v := 1; v <= visits[n.ID]; v++ {
			ts, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: runID, Node: n.ID, Visit: v})
			if err != nil {
				return err
			}
			if len(*out)+len(ts) > MaxJournalTurns {
				return errJournalTooLarge
			}
			*out = append(*out, ts...)
		}
	}
	return nil
}

// maxJournalFlows bounds the flows whose tools a journal declares: the
// run's and those it may start, transitively.
const maxJournalFlows = 64

// journalTools declares the tools f calls and those of the flows it may
// start (their latest versions, which a start pins), sorted by name: a
// replay registers all of them with no plugin installed.
func journalTools(ctx context.Context, e *Engine, f *flows.Flow) []flows.ToolInfo {
	seen, known := map[string]bool{}, map[string]bool{f.Name: true}
	var out []flows.ToolInfo
	queue := []*flows.Flow{f}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, u := range f.ToolUses() {
			if seen[u.Tool] {
				continue
			}
			seen[u.Tool] = true
			if info, ok := e.tools.LookupTool(u.Tool); ok {
				out = append(out, info)
			}
		}
		for _, n := range f.Nodes {
			for _, name := range append([]string{n.Flow}, n.Flows...) {
				if name == "" || known[name] || len(known) >= maxJournalFlows {
					continue
				}
				known[name] = true
				if child, err := e.book.latest(ctx, name); err == nil {
					queue = append(queue, child.flow)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b flows.ToolInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}
