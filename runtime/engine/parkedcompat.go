package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/store"
)

// CodeParkedIncompatible warns at registration that parked runs of an
// older version of a registered flow could not go on under the new one
// (they stay pinned to their own version; `weir run migrate` refuses
// them).
const CodeParkedIncompatible flows.Code = "W_PARKED_INCOMPATIBLE"

// Bounds of the registration's report on parked runs.
const (
	// maxParkedRunIDs is the most run ids a warning names per version;
	// it gives the count of all.
	maxParkedRunIDs = 5
	// maxParkedGroups is the most (version, position) groups of one
	// flow's parked runs the report reads; past it, it says it stopped.
	maxParkedGroups = 1000
	// maxUnplaced is the most runs of one version without a Position
	// (parked before it was kept) whose continuations the report reads.
	maxUnplaced = 1000
	// maxParkedCounted bounds the count of one group's runs: past it the
	// warning says "at least" (listing 10,000 ids would cost a
	// registration several times its own work; `weir run ls --flow F
	// --phase waiting` lists them all).
	maxParkedCounted = 50
)

// "Parked" is a run in store.PhaseWaiting: its step task released with a
// future ready time until a wake, every park (parkTx) is one: a wait
// node's person or event, an agent's approvals, runaway guard or budget,
// an unknown outcome asked of a person, retries exhausted and parked for a
// redrive, and a node waiting on its children (a subflow, a fan-out, an
// agent's calls). A queued run (never started) and a running one (its
// step leased, or its retry's backoff ready soon) are not parked: they run
// on their own version without a person's say.

// parkedHeld is what a parked run holds that another version must fit:
// the node it is parked at, the nodes whose results or errors it keeps,
// and the nodes with open waits.
func parkedHeld(c *continuation) (at string, done, waits []string) {
	done = slices.Sorted(maps.Keys(c.Results))
	for id := range c.Errors {
		if _, ok := c.Results[id]; !ok {
			done = append(done, id)
		}
	}
	slices.Sort(done)
	seen := map[string]bool{}
	for id := range c.Waits {
		seen[id] = true
	}
	for _, ws := range c.Approvals {
		if ws.Node != "" {
			seen[ws.Node] = true
		}
	}
	return c.Node, done, slices.Sorted(maps.Keys(seen))
}

// parkedPosition is the Position a parked run is indexed by: its node and
// a digest of what it holds, so that runs parked alike are one group and
// registration checks each group once.
func parkedPosition(c *continuation) string {
	at, done, waits := parkedHeld(c)
	h := sha256.New()
	for _, id := range done {
		h.Write([]byte(id + "\n"))
	}
	h.Write([]byte{0})
	for _, id := range waits {
		h.Write([]byte(id + "\n"))
	}
	digest := hex.EncodeToString(h.Sum(nil)[:16])
	if len(at) > 256 || store.CheckPart("node", at) != nil {
		return digest
	}
	return at + ":" + digest
}

// parkedReport reads the parked runs of the registered flows' older
// versions through the store's parked index and says which could not go
// on under the new version (flows.CompatibleParked).
type parkedReport struct {
	st   store.Store
	book *flowBook
	log  hclog.Logger
	// prev maps each registered flow's name to its latest version before
	// the registration ("" or absent: none).
	prev map[string]string
}

// parkedVersion is what the report found for one older version.
type parkedVersion struct {
	version string
	count   int
	atLeast bool // a group had more than maxParkedCounted runs
	ids     []string
	why     textbound.List
	whySeen map[string]bool
	stopped bool
}

func (pv *parkedVersion) add(ids []string, count int, misfits []flows.Misfit) {
	pv.count += count
	for _, id := range ids {
		if len(pv.ids) < maxParkedRunIDs {
			pv.ids = append(pv.ids, id)
		}
	}
	for _, m := range misfits {
		if s := m.String(); !pv.whySeen[s] {
			pv.whySeen[s] = true
			pv.why.Add(s)
		}
	}
}

// warnings are the registration's W_PARKED_INCOMPATIBLE warnings for vs:
// one per older version with parked runs that do not fit, and one per
// parked caller's version that will call a registered flow whose input
// schema changed (parkedcallers.go). The versions are stored: what cannot
// be read is logged and skipped, never an error.
func (r parkedReport) warnings(ctx context.Context, vs []*flows.Version) flows.Diagnostics {
	var ds flows.Diagnostics
	for _, v := range vs {
		f := v.Flow
		found, err := r.flow(ctx, f.Name, f.Hash, func(old *flows.Flow, at string, done, waits []string) []flows.Misfit {
			return flows.CompatibleParked(old, f, at, done, waits)
		})
		if err != nil {
			r.log.Error("reading the parked runs of a registered flow's older versions", "flow", f.Name, "error", err)
		}
		for _, pv := range found {
			ds = append(ds, parkedWarning(f, f.Name, pv))
		}
		ds = append(ds, r.callers(ctx, f)...)
	}
	return ds
}

// parkedCheck says what does not fit in a parked run of version old, at
// node at, holding the nodes done and open waits at waits.
type parkedCheck func(old *flows.Flow, at string, done, waits []string) []flows.Misfit

// flow reads the parked groups of flow name's versions other than skip
// and checks each.
func (r parkedReport) flow(ctx context.Context, name, skip string, check parkedCheck) ([]*parkedVersion, error) {
	var groups []store.ParkedGroup
	if err := r.st.View(ctx, func(tx store.Tx) error {
		var err error
		groups, err = tx.RunParkedGroups(store.RunParkedGroupsParams{Flow: name, Limit: maxParkedGroups + 1})
		return err
	}); err != nil {
		return nil, err
	}
	stopped := len(groups) > maxParkedGroups
	groups = groups[:min(len(groups), maxParkedGroups)]
	var out []*parkedVersion
	var cur *parkedVersion
	for _, g := range groups {
		if g.Version == skip {
			continue
		}
		if cur == nil || cur.version != g.Version {
			cur = &parkedVersion{version: g.Version, whySeen: map[string]bool{}}
			out = append(out, cur)
		}
		old, err := r.book.version(ctx, name, g.Version)
		if err != nil {
			return out, err
		}
		if err := r.group(ctx, name, old.flow, g, cur, check); err != nil {
			return out, err
		}
	}
	if stopped && cur != nil {
		cur.stopped = true
	}
	return slices.DeleteFunc(out, func(pv *parkedVersion) bool { return pv.count == 0 }), nil
}

// group checks one group: its first run's continuation stands for all
// (they hold the same), unless the group has no Position, whose runs are
// read one by one.
func (r parkedReport) group(ctx context.Context, name string, old *flows.Flow, g store.ParkedGroup, pv *parkedVersion, check parkedCheck) error {
	p := store.RunParkedListParams{Flow: name, Version: g.Version, Position: g.Position, Limit: maxParkedCounted + 1}
	if g.Position == "" {
		p.Limit = maxUnplaced
	}
	return r.st.View(ctx, func(tx store.Tx) error {
		if g.Position != "" {
			misfits, err := runMisfits(tx, g.First, old, check)
			if err != nil || len(misfits) == 0 {
				return err
			}
			ids, err := tx.RunParkedList(p)
			if err != nil {
				return err
			}
			if len(ids) > maxParkedCounted {
				ids, pv.atLeast = ids[:maxParkedCounted], true
			}
			pv.add(ids, len(ids), misfits)
			return nil
		}
		ids, err := tx.RunParkedList(p)
		if err != nil {
			return err
		}
		for _, id := range ids {
			misfits, err := runMisfits(tx, id, old, check)
			if err != nil {
				return err
			}
			if len(misfits) > 0 {
				pv.add([]string{id}, 1, misfits)
			}
		}
		return nil
	})
}

// runMisfits reads run id's continuation and checks it.
func runMisfits(tx store.Tx, id string, old *flows.Flow, check parkedCheck) ([]flows.Misfit, error) {
	raw, err := tx.ContinuationGet(id)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	at, done, waits := parkedHeld(c)
	return check(old, at, done, waits), nil
}

// parkedWarning is the warning of one version of flow name's parked
// runs, at the declaration of f (the flow registered).
func parkedWarning(f *flows.Flow, name string, pv *parkedVersion) flows.Diagnostic {
	atLeast := ""
	if pv.atLeast {
		atLeast = "at least "
	}
	runs := strings.Join(pv.ids, ", ")
	if pv.count > len(pv.ids) {
		runs += fmt.Sprintf(" and %s%d more", atLeast, pv.count-len(pv.ids))
	}
	count := atLeast + strconv.Itoa(pv.count)
	msg := fmt.Sprintf("%s parked run(s) of flow %s's version %s could not go on under this version, so they stay on their own (%s): %s",
		count, name, shortHash(pv.version), runs, pv.why.Join("; "))
	if name != f.Name {
		msg = fmt.Sprintf("%s parked run(s) of flow %s's version %s will call flow %s's new version (%s): %s",
			count, name, shortHash(pv.version), f.Name, runs, pv.why.Join("; "))
	}
	if pv.stopped {
		msg += fmt.Sprintf(" (the report read the first %d groups of parked runs and stopped)", maxParkedGroups)
	}
	return flows.Diagnostic{Pos: f.Pos, Code: CodeParkedIncompatible, Severity: flows.SeverityWarning, Message: msg}
}
