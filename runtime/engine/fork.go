package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	ownerctx "github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
)

// A fork is a new run that starts where another run once was
// (docs/design.md §5.6): its journal begins with the source's
// work completed before the fork point, copied and never run again, and
// from the fork point on it runs anew under its own run id, so every
// idempotency key it makes is its own. The source run is never changed;
// its timeline gains a fork_made event.
//
// What is copied is decided from the source's timeline: every node end
// (node_completed, node_failed) is one visit of one node, and following
// the wires those ends took from the entry gives the order in which
// visits started. The fork point NODE@VISIT is the VISIT-th start of
// NODE; the work before it is every visit that ended before that start.
// The source keeps only each node's latest result and error, so:
//
//   - a node whose every completion came before the fork point has its
//     result copied (and the error of a node whose every failure did);
//   - a node that completed again at or after the fork point (a loop
//     went round again) keeps, in the source, a result made after the
//     point: it is not copied, and the answer names it (NotCopied), so a
//     callable that reads it fails visibly rather than reading the
//     future;
//   - visit counters are those at the fork point, its own visit
//     included, so max_visits counts on from where the source was;
//   - agent turns of the visits that ended before the point are copied
//     (never asked again); waits, approvals and cohorts are not: they
//     belong to visits the fork makes anew.
//
// The fork has the source's budget, whole: the copied work cost it
// nothing, and what runs from the fork point is paid for again.

// Event types of forks.
const (
	evForked   = "forked"    // on the new run: what it was forked from, by whom, why
	evForkMade = "fork_made" // on the source run: the fork made from it
)

// Versions a fork may run.
const (
	// ForkPinned runs the version the source ran (the default).
	ForkPinned = "pinned"
	// ForkLatest runs the flow's latest version, if the fork point and
	// the copied results fit it (flows.Compatible).
	ForkLatest = "latest"
)

// MaxForkEvents bounds the source timeline a fork reads to find its
// point; a run with a longer timeline is forked from no point (refused,
// E_FORK_POINT) rather than read without bound.
const MaxForkEvents = 100_000

// MaxReasonBytes bounds the reason an operator gives for an operation.
const MaxReasonBytes = 1024

// ForkParams asks for a fork of a run.
type ForkParams struct {
	// Owner is the caller: only the source run's owner may fork it, and
	// the fork is the caller's.
	Owner string
	// RunID is the source run.
	RunID string
	// From is the fork point: "NODE" (its latest visit in the source) or
	// "NODE@VISIT".
	From string
	// Input replaces the source's input, checked against the input schema
	// of the version the fork runs; nil: the source's input.
	Input json.RawMessage
	// Version is ForkPinned ("" too) or ForkLatest.
	Version string
	// AllowEffects accepts that at-most-once calls after the fork point
	// are made again.
	AllowEffects bool
	// RequestID is the client's request id: the fork's own is derived
	// from it (requestid.Derive("fork:", ...)), so a retry makes one
	// fork. "": a fresh one, no dedup.
	RequestID string
	// By is the actor recorded on both runs' timelines ("": Owner);
	// Reason says why (optional).
	By, Reason string
}

// ForkResult answers a fork.
type ForkResult struct {
	RunID string `json:"run_id"`
	// Existing: the request id made this fork before; nothing new was made.
	Existing bool          `json:"existing"`
	From     store.ForkRef `json:"forked_from"`
	Version  string        `json:"version"`
	// Copied are the nodes whose results were copied; NotCopied those
	// whose result before the point the source no longer keeps.
	Copied    []string `json:"copied"`
	NotCopied []string `json:"not_copied,omitempty"`
	// Reruns are the nodes reachable from the fork point: what may run
	// again. Effects are those of them (and of the flows they start) that
	// may call an at-most-once tool.
	Reruns  []string           `json:"reruns"`
	Effects []flows.EffectSite `json:"effects"`
}

// Fork makes a new run of p.Owner from p.RunID at p.From (see the notes
// above). It is refused, changing nothing, when the run is not the
// caller's or no longer kept (E_NOT_FOUND), the point was never reached
// or does not fit the version (E_FORK_POINT), the input fails the
// schema (E_BAD_INPUT), or at-most-once calls would run again without
// p.AllowEffects (E_FORK_EFFECTS). The fork is admitted like any start
// and written in one transaction, whole or not at all.
func (o *Ops) Fork(ctx context.Context, p ForkParams) (*ForkResult, error) {
	res, err := o.fork(ownerctx.WithOwner(ctx, p.Owner), p)
	var ee *Error
	if errors.As(err, &ee) && ee.Class == ClassStorage && ee.Code == CodeStorage {
		o.e.admission.close(CodeStorage, ee.Message)
		o.e.log.Error("storage fault", "incident", ee.Incident, "error", ee.cause)
	}
	return res, err
}

func (o *Ops) fork(ctx context.Context, p ForkParams) (*ForkResult, error) {
	node, visit, err := checkForkParams(p)
	if err != nil {
		return nil, err
	}
	src, err := o.forkSource(ctx, p.Owner, p.RunID)
	if err != nil {
		return nil, err
	}
	if visit == 0 {
		visit = src.cont.Visits[node]
	}
	ref := store.ForkRef{RunID: src.run.ID, Node: node, Visit: visit}
	input := src.run.Input
	if p.Input != nil {
		if input, err = canonicalInput(p.Input); err != nil {
			return nil, err
		}
	}
	reqID := forkRequestID(ref, p.RequestID)
	if p.RequestID != "" {
		if res, err := o.forkAgain(ctx, p.Owner, reqID, src.run.Flow, hashHex(input)); res != nil || err != nil {
			return res, err
		}
	}
	plan, err := planFork(src.fe.flow, src.cont, src.events, node, visit)
	if err != nil {
		return nil, err
	}
	fe, err := o.forkVersion(ctx, src, plan, p.Version)
	if err != nil {
		return nil, err
	}
	if err := o.e.book.validateInput(ctx, fe, input); err != nil {
		return nil, protocolErr(CodeBadInput, "input for flow %q: %v", src.run.Flow, err)
	}
	res := &ForkResult{From: ref, Version: fe.hash, Copied: plan.copied, NotCopied: plan.notCopied,
		Reruns: flows.Reachable(fe.flow, node), Effects: o.effectSites(ctx, fe.flow, node)}
	if len(res.Effects) > 0 && !p.AllowEffects {
		return nil, forkEffectsErr(ref, res.Effects)
	}
	turns, err := o.forkTurns(ctx, src.run.ID, plan)
	if err != nil {
		return nil, err
	}
	failpoint.Hit(failpoint.ForkRead)
	w := forkWrite{e: o.e, src: src.run, ref: ref, plan: plan, fe: fe, input: input, reqID: reqID, turns: turns, p: p, res: res}
	run, existing, err := admitStart(ctx, o.e, p.Owner, w.build, w.write)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return dedupForkAnswer(ctx, o.e.st, existing, src.run.Flow, hashHex(input))
	}
	failpoint.Hit(failpoint.AfterFork)
	res.RunID = run.ID
	return res, nil
}

// checkForkParams checks what the caller sent and parses the fork point
// (visit 0: NODE alone, its latest visit).
func checkForkParams(p ForkParams) (string, int, error) {
	if p.Owner == "" {
		return "", 0, protocolErr(CodeBadRequest, "no owner")
	}
	if err := CheckPrintable("run id", p.RunID, MaxIDBytes); err != nil {
		return "", 0, err
	}
	if p.RunID == "" {
		return "", 0, protocolErr(CodeBadRequest, "no run to fork")
	}
	if err := CheckRequestID(p.RequestID); err != nil {
		return "", 0, err
	}
	if err := CheckPrintable("reason", p.Reason, MaxReasonBytes); err != nil {
		return "", 0, err
	}
	if err := CheckPrintable("actor", p.By, MaxIDBytes); err != nil {
		return "", 0, err
	}
	switch p.Version {
	case "", ForkPinned, ForkLatest:
	default:
		return "", 0, protocolErr(CodeBadRequest, "version %q: want %q or %q", textbound.Quote(p.Version), ForkPinned, ForkLatest)
	}
	return ParseForkPoint(p.From)
}

// ParseForkPoint reads "NODE" (visit 0: the latest) or "NODE@VISIT".
func ParseForkPoint(from string) (string, int, error) {
	if err := CheckPrintable("fork point", from, MaxIDBytes); err != nil {
		return "", 0, err
	}
	node, v, hasVisit := strings.Cut(from, "@")
	if node == "" {
		return "", 0, protocolErr(CodeForkPoint, "no fork point: name a node, NODE or NODE@VISIT")
	}
	if !hasVisit {
		return node, 0, nil
	}
	visit, err := strconv.Atoi(v)
	if err != nil || visit < 1 {
		return "", 0, protocolErr(CodeForkPoint, "fork point %q: the visit after @ must be a number from 1", textbound.Quote(from))
	}
	return node, visit, nil
}

// forkRequestID is the fork's request id: derived from the source, the
// point and the client's request id (a fresh id when there is none).
func forkRequestID(ref store.ForkRef, client string) string {
	if client == "" {
		client = newID("req")
	}
	return requestid.Derive("fork:", ref.RunID, forkPointString(ref), client)
}

func forkPointString(ref store.ForkRef) string { return ref.Node + "@" + strconv.Itoa(ref.Visit) }

// forkSource is what a fork reads of its source run.
type forkSource struct {
	run    *store.Run
	cont   *continuation
	events []*store.Event
	fe     *flowEntry // the version the source ran
}

// forkSource reads the caller's run runID, its continuation and its
// timeline (at most MaxForkEvents), and the version it ran. Another
// owner's run is answered as a missing one, and audited.
func (o *Ops) forkSource(ctx context.Context, owner, runID string) (*forkSource, error) {
	e := o.e
	src := &forkSource{}
	var raw []byte
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if src.run, err = tx.RunGet(runID); err != nil || src.run.Owner != owner {
			return err
		}
		if raw, err = tx.ContinuationGet(runID); err != nil {
			return err
		}
		src.events, err = tx.EventList(store.EventListParams{RunID: runID, Limit: MaxForkEvents + 1})
		return err
	})
	if err == nil && src.run.Owner != owner {
		e.auditor.foreign(ctx, owner, runID, "fork")
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocolErr(CodeNotFound, "no run %s to fork: it never existed, is not yours, or retention has removed it since it finished", runID)
	}
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	if len(src.events) > MaxForkEvents {
		return nil, protocolErr(CodeForkPoint, "run %s has more than %d events: too long a timeline to find a fork point in", runID, MaxForkEvents)
	}
	if src.cont, err = decodeContinuation(raw); err != nil {
		return nil, protocolErr(CodeForkPoint, "run %s: its journal cannot be read: %v", runID, err)
	}
	if src.fe, err = e.book.version(ctx, src.run.Flow, src.run.Version); err != nil {
		return nil, &Error{Code: CodeFlowUnreadable, Class: ClassRun, Message: err.Error()}
	}
	return src, nil
}

// forkAgain answers a retried fork: the run its request id made, or nil
// when it made none yet.
func (o *Ops) forkAgain(ctx context.Context, owner, reqID, flow, inputHash string) (*ForkResult, error) {
	var d *store.Dedup
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		d, err = tx.DedupGet(owner, reqID)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, storageErr(err)
	}
	return dedupForkAnswer(ctx, o.e.st, d, flow, inputHash)
}

// dedupForkAnswer is a start's dedup answer as a fork's: the earlier
// fork, with what it was forked from.
func dedupForkAnswer(ctx context.Context, st store.Store, d *store.Dedup, flow, inputHash string) (*ForkResult, error) {
	sr, err := dedupAnswer(ctx, st, d, flow, inputHash)
	if err != nil {
		return nil, err
	}
	res := &ForkResult{RunID: sr.RunID, Existing: true}
	_ = st.View(ctx, func(tx store.Tx) error {
		if r, err := tx.RunGet(sr.RunID); err == nil && r.ForkedFrom != nil {
			res.From, res.Version = *r.ForkedFrom, r.Version
		}
		return nil
	})
	return res, nil
}

// forkVersion is the version the fork runs: the source's, or the latest
// when asked and the fork point and the copied work fit it.
func (o *Ops) forkVersion(ctx context.Context, src *forkSource, plan *forkPlan, version string) (*flowEntry, error) {
	if version != ForkLatest {
		return src.fe, nil
	}
	fe, err := o.e.book.latest(ctx, src.run.Flow)
	if err != nil || fe.hash == src.fe.hash {
		return fe, err
	}
	done := append(append([]string{}, plan.copied...), plan.visited...)
	if misfits := flows.Compatible(src.fe.flow, fe.flow, plan.cont.Node, done); len(misfits) > 0 {
		var l textbound.List
		for _, m := range misfits {
			l.Add(m.String())
		}
		return nil, protocolErr(CodeForkPoint, "the fork point %s and the work copied do not fit flow %s's latest version %s: %s (fork on the pinned version instead)",
			plan.cont.Node, src.run.Flow, shortHash(fe.hash), l.Join("; "))
	}
	return fe, nil
}

func shortHash(h string) string { return h[:min(len(h), 12)] }

// effectSites walks f from node for at-most-once calls, with the tools
// the engine has and the latest version of every flow a node starts.
func (o *Ops) effectSites(ctx context.Context, f *flows.Flow, node string) []flows.EffectSite {
	sites := flows.EffectSites(f, node, flows.EffectLookup{
		Tool: o.e.tools.LookupTool,
		Flow: func(name string) *flows.Flow {
			if fe, err := o.e.book.latest(ctx, name); err == nil {
				return fe.flow
			}
			return nil
		},
	})
	if sites == nil {
		sites = []flows.EffectSite{}
	}
	return sites
}

// forkEffectsErr refuses a fork that would make at-most-once calls
// again, naming each (the first maxForkSites).
func forkEffectsErr(ref store.ForkRef, sites []flows.EffectSite) *Error {
	var l textbound.List
	for _, s := range sites {
		if l.Full() {
			l.Skip(1)
			continue
		}
		l.Add(s.String())
	}
	return protocolErr(CodeForkEffects, "a fork of %s from %s may call at-most-once tools again at %d site(s): %s; allow it with --allow-effects (allow_effects), or fork from a later node",
		ref.RunID, forkPointString(ref), len(sites), l.Join("; "))
}

// forkTurns reads the agent turns the fork copies: those of the visits
// of agent nodes that ended before the fork point.
func (o *Ops) forkTurns(ctx context.Context, runID string, plan *forkPlan) ([]*store.AgentTurn, error) {
	var turns []*store.AgentTurn
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		turns = nil
		for _, nv := range plan.agentVisits {
			ts, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: runID, Node: nv.node, Visit: nv.visit})
			if err != nil {
				return err
			}
			turns = append(turns, ts...)
		}
		return nil
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return turns, nil
}

// forkWrite builds and writes the fork run.
type forkWrite struct {
	e     *Engine
	src   *store.Run
	ref   store.ForkRef
	plan  *forkPlan
	fe    *flowEntry
	input json.RawMessage
	reqID string
	turns []*store.AgentTurn
	p     ForkParams
	res   *ForkResult
}

func (w *forkWrite) build(runID string, cfg *Config) (*store.Run, *store.Task) {
	now := w.e.clock.Now()
	ref := w.ref
	run := &store.Run{
		ID: runID, Flow: w.src.Flow, Version: w.fe.hash, Owner: w.p.Owner, RequestID: w.reqID,
		Input: w.input, InputHash: hashHex(w.input), Phase: store.PhaseQueued, Attempt: 1, Ancestors: []string{},
		DepthLimit: w.fe.flow.MaxDepth, ConfigVersion: cfg.ConfigVersion, Budget: w.src.Budget,
		ForkedFrom: &ref, StartedBy: "fork:" + ref.RunID + ":" + forkPointString(ref), CreatedAt: now, UpdatedAt: now,
	}
	return run, newStepTask(run, ref.Node, now)
}

// write is the fork's one transaction: the dedup record, the run, its
// first task and its events (acceptTx), the copied continuation over the
// empty one, the copied agent turns, and the fork's events on both runs.
func (w *forkWrite) write(tx store.Tx, run *store.Run, task *store.Task) (*store.Dedup, error) {
	if d, err := w.e.journal.acceptTx(tx, run, task, w.ref.Node, "", ""); d != nil || err != nil {
		return d, err
	}
	if err := tx.ContinuationPut(run.ID, encodeContinuation(w.plan.cont)); err != nil {
		return nil, err
	}
	for _, t := range w.turns {
		c := *t
		c.RunID = run.ID
		if err := tx.AgentTurnPut(&c); err != nil {
			return nil, err
		}
	}
	by := w.p.By
	if by == "" {
		by = w.p.Owner
	}
	detail := map[string]any{"run": w.ref.RunID, "node": w.ref.Node, "visit": w.ref.Visit, "by": by,
		"copied": len(w.plan.copied), "effects": len(w.res.Effects), "allow_effects": w.p.AllowEffects}
	if w.p.Reason != "" {
		detail["reason"] = w.p.Reason
	}
	if err := appendEvent(tx, run.ID, evForked, run.Attempt, w.ref.Node, detail, run.CreatedAt); err != nil {
		return nil, err
	}
	made := map[string]any{"fork": run.ID, "node": w.ref.Node, "visit": w.ref.Visit, "by": by}
	if w.p.Reason != "" {
		made["reason"] = w.p.Reason
	}
	return nil, appendEvent(tx, w.ref.RunID, evForkMade, 0, w.ref.Node, made, run.CreatedAt)
}

// Bounds of a lineage: how many forks up a family's root is looked for,
// and how many of the owner's runs, newest first, are searched for its
// forks.
const (
	MaxLineageDepth = 64
	MaxLineageScan  = 10_000
)

// Lineage lists the family of owner's run runID, oldest first: the run
// its forks descend from (following ForkedFrom up, at most
// MaxLineageDepth times), and every fork of it, of its forks and so on,
// among owner's latest MaxLineageScan runs. A source removed by retention
// ends the walk up there.
func (o *Ops) Lineage(ctx context.Context, owner, runID string) ([]*store.Run, error) {
	run, err := o.e.Get(ctx, owner, runID)
	if err != nil {
		return nil, err
	}
	var runs []*store.Run
	err = o.e.st.View(ctx, func(tx store.Tx) error {
		for i := 0; i < MaxLineageDepth && run.ForkedFrom != nil; i++ {
			up, err := tx.RunGet(run.ForkedFrom.RunID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && up.Owner != owner) {
				break
			}
			if err != nil {
				return err
			}
			run = up
		}
		var err error
		runs, err = tx.RunList(store.RunListParams{Owner: owner, Order: store.OrderNewest, Limit: MaxLineageScan})
		return err
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return family(run, runs), nil
}

// family is root and the runs of runs that descend from it by forks,
// root first, then oldest first (runs is newest first). Passes repeat
// until one adds nothing: runs created at the same instant may come in
// any order.
func family(root *store.Run, runs []*store.Run) []*store.Run {
	in := map[string]bool{root.ID: true}
	out := []*store.Run{root}
	for added := true; added; {
		added = false
		for i := len(runs) - 1; i >= 0; i-- {
			r := runs[i]
			if r.ForkedFrom != nil && in[r.ForkedFrom.RunID] && !in[r.ID] {
				in[r.ID], added = true, true
				out = append(out, r)
			}
		}
	}
	return out
}
