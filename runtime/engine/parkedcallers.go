package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
)

// maxCallerFlows bounds the flows the subflow check reads for callers of
// a flow whose input schema changed (their latest versions, one at a
// time); past it the callers of the rest are not looked for.
const maxCallerFlows = 1000

// callers warns of the parked runs that will call f's new version with
// arguments written for another input schema: when f's input schema
// differs from its previous version's, every flow whose latest version
// starts f (a subflow, a flow fan-out, an agent's flow tool) is a caller,
// and a parked run of a caller (of any of its versions) counts when a
// node that starts f is still ahead of it: reachable from the node it is
// parked at, or that node itself unless it is a subflow already waiting
// on its child (which runs on the version it started on). A node's
// arguments are computed by the caller's script from the run's context,
// so what is checked is the schema's change, not the arguments a run
// would send. Flows declare no output schema, so a changed output is not
// checked. A caller that starts f only in an older version than its
// latest is not looked for.
func (r parkedReport) callers(ctx context.Context, f *flows.Flow) flows.Diagnostics {
	changed, err := r.inputChanged(ctx, f)
	if err != nil {
		r.log.Error("reading a registered flow's previous version for its callers' parked runs", "flow", f.Name, "error", err)
	}
	if !changed {
		return nil
	}
	names, err := r.callerNames(ctx, f.Name)
	if err != nil {
		r.log.Error("finding the callers of a registered flow", "flow", f.Name, "error", err)
	}
	var ds flows.Diagnostics
	for _, name := range names {
		found, err := r.flow(ctx, name, "", func(old *flows.Flow, at string, _, _ []string) []flows.Misfit {
			return callsAhead(old, at, f.Name)
		})
		if err != nil {
			r.log.Error("reading the parked runs of a registered flow's caller", "flow", f.Name, "caller", name, "error", err)
		}
		for _, pv := range found {
			ds = append(ds, parkedWarning(f, name, pv))
		}
	}
	return ds
}

// inputChanged says whether f's input schema differs from the one of the
// version of its name that was the latest before it (false when there was
// none, or it was f).
func (r parkedReport) inputChanged(ctx context.Context, f *flows.Flow) (bool, error) {
	prev := r.prev[f.Name]
	if prev == "" || prev == f.Hash {
		return false, nil
	}
	old, err := r.book.version(ctx, f.Name, prev)
	if err != nil {
		return false, err
	}
	return !sameSchema(old.flow.Input, f.Input), nil
}

// latestHashes maps the names of vs to their latest versions' hashes, as
// the store has them now; a name it cannot read is left out (the report
// on its callers is then skipped).
func latestHashes(ctx context.Context, st store.Store, vs []*flows.Version) map[string]string {
	out := map[string]string{}
	_ = st.View(ctx, func(tx store.Tx) error {
		for _, v := range vs {
			if fv, err := tx.FlowVersionLatest(v.Flow.Name); err == nil {
				out[v.Flow.Name] = fv.Hash
			}
		}
		return nil
	})
	return out
}

// sameSchema compares two schemas as compact JSON.
func sameSchema(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// callerNames are the flows (at most maxCallerFlows read) whose latest
// version has a node that starts callee.
func (r parkedReport) callerNames(ctx context.Context, callee string) ([]string, error) {
	var out []string
	after := ""
	for read := 0; read < maxCallerFlows; {
		var page []*store.FlowVersion
		if err := r.st.View(ctx, func(tx store.Tx) error {
			names, err := tx.FlowNameList(store.FlowNameListParams{After: after, Limit: min(100, maxCallerFlows-read)})
			if err != nil {
				return err
			}
			page = page[:0]
			for _, name := range names {
				v, err := tx.FlowVersionLatest(name)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				page = append(page, v)
			}
			if len(names) > 0 {
				after = names[len(names)-1]
			}
			read += len(names)
			if len(names) == 0 {
				read = maxCallerFlows
			}
			return nil
		}); err != nil {
			return out, err
		}
		for _, v := range page {
			if v.Name == callee {
				continue
			}
			fe, err := r.book.version(ctx, v.Name, v.Hash)
			if err != nil {
				return out, err
			}
			if slices.ContainsFunc(fe.flow.Nodes, func(n *flows.Node) bool { return slices.Contains(n.Callees(), callee) }) {
				out = append(out, v.Name)
			}
		}
	}
	return out, nil
}

// callsAhead lists the nodes of old that will start callee for a run
// parked at node at.
func callsAhead(old *flows.Flow, at, callee string) []flows.Misfit {
	var out []flows.Misfit
	for _, id := range flows.Reachable(old, at) {
		n := old.Node(id)
		if !slices.Contains(n.Callees(), callee) || (id == at && n.Kind == flows.KindSubflow) {
			continue
		}
		out = append(out, flows.Misfit{Node: id,
			Why: "starts flow " + callee + ", whose input schema this version changes: the arguments were written for the previous schema and may be refused"})
	}
	return out
}
