package main

import (
	"encoding/json"
	"fmt"
	"os/user"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Invariant names: one line each in the output.
const (
	invLost     = "none lost"
	invIdentity = "ids, owners and inputs unchanged"
	invDedup    = "dedup never created a second run"
	invMail     = "mail.send at most once"
	invUnknown  = "unknown outcomes say E_OUTCOME_UNKNOWN"
	invIdem     = "idempotent effects exactly once (notes.put)"
	invOutputs  = "completed runs computed the right result"
	invLease    = "no lease held by two workers"
	invBudget   = "budget never negative"
	invCancel   = "cancels honoured"
	invRestart  = "the daemon always restarted and stopped cleanly"
	invCoverage = "every failpoint fired"
	invCohort   = "every closed cohort has its marker and cutoff, no late result in its batch"
	invRedrive  = "every redriven task ends, none redriven twice"
)

// invariant is one promise checked at the end of a soak. check returns the
// violations (violations seen while the soak ran are added to them by
// name); summary says what was checked when there are none. Subflows,
// waits and cohorts add theirs here: a closed cohort's marker and cutoff,
// a parent woken by its child, a wait decided once.
type invariant struct {
	name    string
	check   func(w *world, f *final) []string
	summary func(w *world, f *final) string
}

var invariants = []invariant{
	{invLost, checkLost, func(w *world, f *final) string {
		ended, parked := 0, 0
		runs := byID(f)
		for _, s := range w.subs {
			if v := runs[s.runID]; v != nil && v.Phase.Terminal() {
				ended++
			} else if v != nil && !busy(v) {
				parked++
			}
		}
		return fmt.Sprintf("%d runs accepted, every one in the store unchanged: %d ended, %d parked on a human wait nobody decided, %d unfinished within the drain bound and still moving",
			acceptedCount(w), ended, parked, len(unfinished(w, f)))
	}},
	{invIdentity, checkIdentity, func(w *world, f *final) string {
		return fmt.Sprintf("%d runs keep the id first answered, their owner and their input", len(f.runs))
	}},
	{invDedup, checkDedup, func(w *world, f *final) string {
		return fmt.Sprintf("%d re-sends with the same input answered the same run, %d with another input refused, one run per request id",
			w.counts["duplicate"], w.counts["conflict refused"])
	}},
	{invMail, checkMailOnce, func(w *world, f *final) string {
		return fmt.Sprintf("%d mails in the outbox, none twice, none without its run", len(f.records.mailRuns))
	}},
	{invUnknown, checkUnknown, func(w *world, f *final) string {
		return fmt.Sprintf("%d sends ended unknown, each after a durable start; every send caught in flight by a kill says so", countCode(f, "send", engine.CodeOutcomeUnknown))
	}},
	{invIdem, checkIdempotent, func(w *world, f *final) string {
		return fmt.Sprintf("%d notes stored, each applied under exactly one idempotency key", len(f.records.notes))
	}},
	{invOutputs, checkOutputs, func(w *world, f *final) string {
		return fmt.Sprintf("%d completed runs checked against their inputs", countPhase(f, apitypes.PhaseCompleted))
	}},
	{invLease, checkLeases, func(w *world, f *final) string {
		n := 0
		for _, evs := range f.events {
			for _, e := range evs {
				if e.Type == "leased" {
					n++
				}
			}
		}
		return fmt.Sprintf("%d leases in the timelines, each released (expired, retried or finished) before the next", n)
	}},
	{invBudget, checkBudget, func(w *world, f *final) string {
		return fmt.Sprintf("%d budgeted runs spent at most their budget of %d, as their timelines add up", countFlow(f, "soak_budget"), budgetCap)
	}},
	{invCancel, checkCancels, func(w *world, f *final) string {
		return fmt.Sprintf("%d cancels requested, %d too late, %d already terminal; no requested run did work in a later lease, none cancelled unasked",
			w.counts["cancel requested"], w.counts["cancel too_late"], w.counts["cancel already_terminal"])
	}},
	{invRestart, func(w *world, f *final) []string { return nil }, func(w *world, f *final) string {
		return "every daemon started and recovered, every failpoint death was a SIGKILL, the last one stopped on SIGTERM"
	}},
	{invCohort, checkCohorts, func(w *world, f *final) string {
		meant := 0
		for _, s := range w.subs {
			if s.approve && s.runID != "" {
				meant++
			}
		}
		return fmt.Sprintf("%d fan-outs closed with a marker and a cutoff, %d children published before it, %d ended late and stayed out; %d approvals of the %d wait runs meant to be decided (of %d), %d subflow parents completed",
			w.counts["cohorts closed"], w.counts["cohort results"], w.counts["cohort late"], w.counts["approved"], meant, countFlow(f, "soak_wait"), countFlowPhase(f, "soak_sub", apitypes.PhaseCompleted))
	}},
	{invAgent, checkAgentTurns, agentSummary},
	{invSteer, checkSteer, steerSummary},
	{invTopup, checkTopups, topupSummary},
	{invWaste, checkWaste, wasteSummary},
	{invRedrive, checkRedrives, func(w *world, f *final) string {
		return fmt.Sprintf("%d redrives, %d redrive-kind runs completed through them, each redriven event after its own exhausted park",
			w.counts["redriven"], countFlowPhase(f, "soak_redrive", apitypes.PhaseCompleted))
	}},
	{invTicks, checkTicks, ticksSummary},
	{invEvents, checkEvents, eventsSummary},
	{invForks, checkForks, forksSummary},
	{invResolve, checkResolves, resolvesSummary},
	{invCoverage, checkCoverage, func(w *world, f *final) string {
		parts := []string{}
		for _, fp := range failpoints {
			parts = append(parts, fmt.Sprintf("%s %d", fp, f.kills[fp]))
		}
		return fmt.Sprintf("%s; random kills %d", strings.Join(parts, ", "), f.kills["random"])
	}},
}

func acceptedCount(w *world) int {
	n := 0
	for _, s := range w.subs {
		if s.runID != "" {
			n++
		}
	}
	return n
}

func byID(f *final) map[string]*apitypes.Run {
	m := make(map[string]*apitypes.Run, len(f.runs))
	for i := range f.runs {
		m[f.runs[i].ID] = &f.runs[i]
	}
	return m
}

// checkLost: every run the client was told about is in the store, and
// either ended, or is parked on a human wait nobody decided, or is still
// moving when the drain's bound ran out. A run is lost when it is missing,
// stuck (the drain found the whole system quiescent with it unfinished, or
// it is leased or parked and made no progress at all during the drain), or
// parked on a child that ended without waking it. What changed in a run
// that is there is the identity invariant's to say.
func checkLost(w *world, f *final) []string {
	runs := byID(f)
	var bad []string
	for _, s := range w.subs {
		if s.runID == "" {
			continue
		}
		v, ok := runs[s.runID]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("run %s (%s, %s) was accepted and is not in the store", s.runID, s.reqID, s.kind.flow))
			continue
		case !busy(v):
			if v.Phase == apitypes.PhaseWaiting {
				if w := waitingFor(f.events[v.ID]); w != "human" {
					bad = append(bad, fmt.Sprintf("run %s (%s) is parked for %q, which only a human wait may be at the end", v.ID, v.Flow, w))
				}
			}
			continue
		}
		if why := lostWake(v, f); why != "" {
			bad = append(bad, why)
			continue
		}
		last := lastEvent(f.events[v.ID])
		switch {
		case f.drain.Quiescent:
			bad = append(bad, fmt.Sprintf("run %s (%s) stuck: still %s at attempt %d when nothing had moved for the quiet window; last event %s",
				v.ID, v.Flow, v.Phase, v.Attempt, describe(last)))
		case heldStill(last, f.drain):
			bad = append(bad, fmt.Sprintf("run %s (%s) stuck: still %s at attempt %d, held by a lease with no progress at all during the %v drain; last event %s",
				v.ID, v.Flow, v.Phase, v.Attempt, f.drain.Took.Round(time.Millisecond), describe(last)))
		}
	}
	return bad
}

// heldStill says a run's last event is a lease taken (or renewed) before
// the drain began: a worker has held it for the whole drain without one
// step. A run whose last event leaves its task in the queue (queued,
// expired, a retry or a park) is waiting its turn behind the backlog while
// the system moves, which is not being stuck.
func heldStill(last *apitypes.Event, d drainReport) bool {
	return last != nil && (last.Type == "leased" || last.Type == "renewed") && last.At.Before(d.Began)
}

// unfinished lists the accepted runs still moving when the drain's bound
// ran out, each with its last event: reported, not counted as lost.
func unfinished(w *world, f *final) []string {
	runs := byID(f)
	var out []string
	for _, s := range w.subs {
		v := runs[s.runID]
		if v == nil || !busy(v) || f.drain.Quiescent || lostWake(v, f) != "" {
			continue
		}
		last := lastEvent(f.events[v.ID])
		if heldStill(last, f.drain) {
			continue // stuck: checkLost's
		}
		out = append(out, fmt.Sprintf("run %s (%s) %s at attempt %d, last event %s", v.ID, v.Flow, v.Phase, v.Attempt, describe(last)))
	}
	return out
}

// lostWake says why a run parked on a subflow child is lost: its child
// ended a quiet window before the drain did and never woke it (the one who
// knows tells; only the 24-hour fallback clock would find it). "" if not.
func lostWake(v *apitypes.Run, f *final) string {
	if v.Phase != apitypes.PhaseWaiting {
		return ""
	}
	var e *apitypes.Event
	evs := f.events[v.ID]
	for i := range evs {
		if evs[i].Type == "waiting" {
			e = &evs[i]
		}
	}
	if e == nil || e.Detail["for"] != "child" {
		return ""
	}
	id, _ := e.Detail["child"].(string)
	for _, c := range f.children[v.ID] {
		if c.ID != id || !c.Phase.Terminal() {
			continue
		}
		end, ok := endedAt(f.events[c.ID])
		if ok && end.Before(f.drain.Began.Add(f.drain.Took-f.drain.Quiet)) {
			return fmt.Sprintf("run %s (%s) still waits for its child %s, which ended %s at %s and never woke it",
				v.ID, v.Flow, id, c.Phase, end.Format(time.RFC3339Nano))
		}
	}
	return ""
}

// waitingFor is what the run's last park waits for ("human", "child",
// "cohort"), from its last waiting event.
func waitingFor(evs []apitypes.Event) string {
	kind := ""
	for _, e := range evs {
		if e.Type == "waiting" {
			kind, _ = e.Detail["for"].(string)
		}
	}
	return kind
}

func lastEvent(evs []apitypes.Event) *apitypes.Event {
	if len(evs) == 0 {
		return nil
	}
	return &evs[len(evs)-1]
}

func describe(e *apitypes.Event) string {
	if e == nil {
		return "none"
	}
	s := fmt.Sprintf("%s at %s", e.Type, e.At.Format(time.RFC3339Nano))
	if e.Node != "" {
		s += " (node " + e.Node + ")"
	}
	return s
}

// endedAt is the time of a timeline's terminal event.
func endedAt(evs []apitypes.Event) (time.Time, bool) {
	for _, e := range evs {
		if e.Type == "completed" || e.Type == "failed" || e.Type == "cancelled" {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// checkIdentity: every stored run belongs to a request the client sent,
// under the id the client was first given, with the caller as owner and
// the very input the client sent.
func checkIdentity(w *world, f *final) []string {
	var bad []string
	want := ""
	if u, err := user.Current(); err == nil {
		want = u.Username
	}
	for _, v := range f.runs {
		s := w.byReq[v.RequestID]
		if s == nil {
			bad = append(bad, fmt.Sprintf("run %s has request id %q that the client never sent", v.ID, v.RequestID))
			continue
		}
		if s.runID != v.ID {
			bad = append(bad, fmt.Sprintf("run %s holds %s, which the client was told is run %s", v.ID, s.reqID, s.runID))
		}
		if want != "" && v.Owner != want {
			bad = append(bad, fmt.Sprintf("run %s is owned by %q, want %q", v.ID, v.Owner, want))
		}
		if v.Flow != s.kind.flow {
			bad = append(bad, fmt.Sprintf("run %s is of flow %s, was started as %s", v.ID, v.Flow, s.kind.flow))
		}
		var got any
		if err := json.Unmarshal(v.Input, &got); err != nil || !reflect.DeepEqual(got, normalize(s.input)) {
			in, _ := json.Marshal(s.input)
			bad = append(bad, fmt.Sprintf("run %s has input %s, was sent %s", v.ID, v.Input, in))
		}
	}
	return bad
}

// checkDedup: one run per request id in the store.
func checkDedup(w *world, f *final) []string {
	var bad []string
	seen := map[string]string{}
	for _, v := range f.runs {
		if v.RequestID == "" {
			bad = append(bad, fmt.Sprintf("run %s has no request id, every soak request has one", v.ID))
			continue
		}
		if other, ok := seen[v.RequestID]; ok {
			bad = append(bad, fmt.Sprintf("request id %s holds two runs: %s and %s", v.RequestID, other, v.ID))
		}
		seen[v.RequestID] = v.ID
	}
	return bad
}

// checkMailOnce counts outbox lines per run: never more than one, and none
// for a run that does not exist (a fork of a mail run is one).
func checkMailOnce(w *world, f *final) []string {
	runs := byID(f)
	for i := range f.forked {
		runs[f.forked[i].ID] = &f.forked[i]
	}
	var bad []string
	for runID, n := range f.records.mailRuns {
		if runs[runID] == nil {
			bad = append(bad, fmt.Sprintf("%d mail(s) sent for run %s, which is not in the store", n, runID))
		}
		if n > 1 {
			bad = append(bad, fmt.Sprintf("run %s sent %d mails, at most one allowed", runID, n))
		}
	}
	for reqID, n := range f.records.mails {
		if n > 1 {
			bad = append(bad, fmt.Sprintf("request %s: %d mails in the outbox", reqID, n))
		}
	}
	return bad
}

// checkUnknown holds each mail run's timeline against the outbox: a send
// that completed left one mail; a mail in the outbox belongs to a send
// that completed or said E_OUTCOME_UNKNOWN; a send whose daemon died after
// its durable start (its lease expired before the send had an outcome)
// says E_OUTCOME_UNKNOWN whatever ends the run; and nothing says
// E_OUTCOME_UNKNOWN without a durable start. (A send stopped by a cancel
// within its lease has an outcome the host knows: the call failed.)
func checkUnknown(w *world, f *final) []string {
	var bad []string
	for _, v := range f.runs {
		if v.Flow != "soak_mail" || !v.Phase.Terminal() {
			continue
		}
		evs := f.events[v.ID]
		started, completed, inFlight, lostInFlight := false, false, false, false
		for _, e := range evs {
			switch {
			case e.Type == "tool_started" && e.Node == "send":
				started, inFlight = true, true
			case (e.Type == "node_completed" || e.Type == "node_failed") && e.Node == "send":
				completed = completed || e.Type == "node_completed"
				inFlight = false
			case e.Type == "expired" && inFlight:
				lostInFlight = true
			}
		}
		code := nodeFailedCode(evs, "send")
		unknown := code == engine.CodeOutcomeUnknown || (v.Error != nil && v.Error.Code == engine.CodeOutcomeUnknown)
		mails := f.records.mailRuns[v.ID]
		switch {
		case completed && mails == 0:
			bad = append(bad, fmt.Sprintf("run %s: the send node completed and the outbox has no mail of it", v.ID))
		case mails > 0 && !completed && !unknown:
			bad = append(bad, fmt.Sprintf("run %s: the mail was sent, and the run ended %s (%s) without saying %s", v.ID, v.Phase, errCode(&v), engine.CodeOutcomeUnknown))
		case lostInFlight && !completed && !unknown:
			bad = append(bad, fmt.Sprintf("run %s: the daemon died with the send started durably, and the run ended %s (%s) without saying %s",
				v.ID, v.Phase, errCode(&v), engine.CodeOutcomeUnknown))
		case unknown && !started:
			bad = append(bad, fmt.Sprintf("run %s says %s without a durable start of the send", v.ID, engine.CodeOutcomeUnknown))
		}
	}
	return bad
}

func errCode(v *apitypes.Run) string {
	if v.Error == nil {
		return "no error"
	}
	return v.Error.Code
}

// checkIdempotent: a completed notes.put left its note with the run's
// text, and every note was applied under one idempotency key only: a key
// that changed across a retry or a restart would apply it twice.
func checkIdempotent(w *world, f *final) []string {
	var bad []string
	for _, v := range f.runs {
		if v.Flow != "soak_note" {
			continue
		}
		s := w.byReq[v.RequestID]
		if s == nil {
			continue // reported by the identity invariant
		}
		key := "soak/" + s.reqID
		done := false
		for _, e := range f.events[v.ID] {
			if e.Type == "node_completed" && e.Node == "put" {
				done = true
			}
		}
		if done && f.records.notes[key] != s.input["text"] {
			bad = append(bad, fmt.Sprintf("run %s: notes.put completed and note %s holds %q, want %q", v.ID, key, f.records.notes[key], s.input["text"]))
		}
		if n := f.records.applied[key]; n > 1 {
			bad = append(bad, fmt.Sprintf("run %s: note %s was applied under %d idempotency keys", v.ID, key, n))
		}
		if done && f.records.applied[key] == 0 {
			bad = append(bad, fmt.Sprintf("run %s: notes.put completed without a dedupe record of it", v.ID))
		}
	}
	return bad
}

// checkOutputs runs each kind's own check of its finished runs.
func checkOutputs(w *world, f *final) []string {
	var bad []string
	for i := range f.runs {
		v := &f.runs[i]
		s, k := w.byReq[v.RequestID], kindByFlow(v.Flow)
		if s == nil || k == nil || !v.Phase.Terminal() {
			continue
		}
		bad = append(bad, k.check(v, normalize(s.input).(map[string]any), f.events[v.ID], f.records)...)
	}
	return bad
}

// checkLeases replays each run's timeline: a task is leased only when no
// lease of it is held; a lease ends by expiry, a scheduled retry, a wait
// or the run's end; only a held lease is renewed.
func checkLeases(w *world, f *final) []string {
	var bad []string
	for runID, evs := range f.events {
		held := map[string]*apitypes.Event{} // task → its leased event
		for i := range evs {
			e := &evs[i]
			task := taskOf(*e)
			switch e.Type {
			case "leased":
				if prev := held[task]; prev != nil {
					bad = append(bad, fmt.Sprintf("run %s: leased again (seq %d, holder %v) while the lease of seq %d (holder %v) was held",
						runID, e.Seq, e.Detail["holder"], prev.Seq, prev.Detail["holder"]))
				}
				held[task] = e
			case "renewed":
				if held[task] == nil {
					bad = append(bad, fmt.Sprintf("run %s: lease renewed (seq %d) while none was held", runID, e.Seq))
				}
			case "expired", "retry_scheduled", "waiting", "dropped", "drained", "item_done", "agent_call_done":
				delete(held, task)
			case "completed", "failed", "cancelled":
				clear(held)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// taskOf names the task an event is about. Runs have one step task today;
// fan-out items will carry theirs in the event detail.
func taskOf(e apitypes.Event) string {
	if t, ok := e.Detail["task"].(string); ok {
		return t
	}
	return "step"
}

// timelineCharges adds up what a timeline charged: each node's cost as it
// completed (an agent's, its turns and calls together), and the turns of
// an agent that did not complete (failed, cancelled, or still under way),
// which only its agent_turn events record.
func timelineCharges(evs []apitypes.Event) float64 {
	var sum float64
	turns := map[string]float64{} // by agent node, since its last completion
	for _, e := range evs {
		switch e.Type {
		case "agent_turn":
			turns[e.Node] += num(e.Detail["cost"])
		case "node_completed":
			sum += num(e.Detail["cost"])
			turns[e.Node] = 0
		}
	}
	for _, c := range turns {
		sum += c
	}
	return sum
}

// checkBudget: a budgeted run never spent more than its budget, and what
// the run record says it spent is what its timeline adds up to
// (timelineCharges).
func checkBudget(w *world, f *final) []string {
	var bad []string
	for _, v := range f.runs {
		if v.Budget > 0 && v.Spent > v.Budget {
			bad = append(bad, fmt.Sprintf("run %s spent %d of a budget of %d", v.ID, v.Spent, v.Budget))
		}
		if v.Spent < 0 {
			bad = append(bad, fmt.Sprintf("run %s spent %d", v.ID, v.Spent))
		}
		if sum := timelineCharges(f.events[v.ID]); int64(sum) != v.Spent {
			bad = append(bad, fmt.Sprintf("run %s records %d spent, its timeline charges %v", v.ID, v.Spent, sum))
		}
	}
	return bad
}

// checkCancels: a run cancelled with the answer "requested" ends cancelled
// (or completed, if its finish decision won the race in the lease it was
// in) and does no new work in a later lease: a run leased again after its
// cancel (a retry, a restart) finishes cancelled without doing its work.
// No run ends cancelled that nobody cancelled.
func checkCancels(w *world, f *final) []string {
	var bad []string
	runs := byID(f)
	for _, s := range w.subs {
		if s.runID == "" {
			continue
		}
		v := runs[s.runID]
		if v == nil {
			continue
		}
		asked := false
		for _, a := range s.cancel {
			if a == apitypes.CancelRequested {
				asked = true
			}
			if a != apitypes.CancelRequested && a != apitypes.CancelTooLate && a != apitypes.CancelAlreadyTerminal {
				bad = append(bad, fmt.Sprintf("run %s: cancel answered %q", v.ID, a))
			}
		}
		requestedAt, relet := uint64(0), false
		for _, e := range f.events[v.ID] {
			switch {
			case e.Type == "cancel_requested":
				if requestedAt == 0 {
					requestedAt = e.Seq
				}
			case requestedAt == 0:
			case e.Type == "leased":
				relet = true
			case relet && (e.Type == "node_completed" || e.Type == "tool_started"):
				bad = append(bad, fmt.Sprintf("run %s: %s of node %s (seq %d) in a lease taken after its cancel (seq %d): the cancelled run resumed its work",
					v.ID, e.Type, e.Node, e.Seq, requestedAt))
				relet = false // one line per run
			}
		}
		if asked && requestedAt == 0 {
			bad = append(bad, fmt.Sprintf("run %s: cancel answered requested, no cancel_requested in its timeline", v.ID))
		}
		if asked && v.Phase != apitypes.PhaseCancelled && v.Phase != apitypes.PhaseCompleted {
			bad = append(bad, fmt.Sprintf("run %s: cancel answered requested, the run ended %s", v.ID, v.Phase))
		}
		if v.Phase == apitypes.PhaseCancelled && requestedAt == 0 {
			bad = append(bad, fmt.Sprintf("run %s ended cancelled and nobody cancelled it", v.ID))
		}
	}
	return bad
}

// checkCoverage: the soak did what it claims, killing the daemon at every
// durable boundary at least once.
func checkCoverage(w *world, f *final) []string {
	var bad []string
	for _, fp := range failpoints {
		if f.kills[fp] == 0 {
			bad = append(bad, fmt.Sprintf("failpoint %s never fired", fp))
		}
	}
	if acceptedCount(w) == 0 {
		bad = append(bad, "no run was accepted")
	}
	return bad
}

func countPhase(f *final, p apitypes.Phase) int {
	n := 0
	for _, v := range f.runs {
		if v.Phase == p {
			n++
		}
	}
	return n
}

func countFlow(f *final, flow string) int {
	n := 0
	for _, v := range f.runs {
		if v.Flow == flow {
			n++
		}
	}
	return n
}

func countCode(f *final, node, code string) int {
	n := 0
	for _, v := range f.runs {
		if nodeFailedCode(f.events[v.ID], node) == code {
			n++
		}
	}
	return n
}

// fanResult is a fan-out node's result (docs/flows.md).
type fanResult struct {
	Results    []json.RawMessage `json:"results"`
	Late       []json.RawMessage `json:"late"`
	Sufficient *bool             `json:"sufficient"`
	Cutoff     time.Time         `json:"cutoff"`
}

// checkCohorts: every completed fan-out run closed its cohort with the
// marker and a cutoff; its result carries that cutoff; and no child that
// finished after the cutoff is in the batch: the results are exactly the
// children completed by then, and every later child is late or stopped.
func checkCohorts(w *world, f *final) []string {
	var bad []string
	for _, v := range f.runs {
		if k := kindByFlow(v.Flow); k == nil || !k.cohort || v.Phase != apitypes.PhaseCompleted {
			continue
		}
		if v.Progress == nil || len(v.Progress.Cohorts) != 1 {
			bad = append(bad, fmt.Sprintf("run %s completed its fan-out without one cohort in its progress: %+v", v.ID, v.Progress))
			continue
		}
		c := v.Progress.Cohorts[0]
		if c.State != "closed" || !c.Marker || c.Cutoff.IsZero() {
			bad = append(bad, fmt.Sprintf("run %s completed with cohort %s: state %s, marker %v, cutoff %v", v.ID, c.Node, c.State, c.Marker, c.Cutoff))
			continue
		}
		var out fanResult
		if err := json.Unmarshal(v.Output, &out); err != nil || out.Sufficient == nil {
			bad = append(bad, fmt.Sprintf("run %s: fan-out result %s is not results/late/sufficient/cutoff (%v)", v.ID, v.Output, err))
			continue
		}
		if !out.Cutoff.Equal(c.Cutoff) {
			bad = append(bad, fmt.Sprintf("run %s: result cutoff %v, cohort cutoff %v", v.ID, out.Cutoff, c.Cutoff))
		}
		before := 0
		for _, child := range f.children[v.ID] {
			if at, ok := completedAt(f.events[child.ID]); ok && !at.After(c.Cutoff) {
				before++
			}
		}
		if len(f.children[v.ID]) > 0 && len(out.Results) != before {
			bad = append(bad, fmt.Sprintf("run %s: %d results in the batch, %d children completed by the cutoff %v", v.ID, len(out.Results), before, c.Cutoff))
		}
		if len(out.Results)+len(out.Late) > c.Items {
			bad = append(bad, fmt.Sprintf("run %s: %d results and %d late of %d items", v.ID, len(out.Results), len(out.Late), c.Items))
		}
		// Tool children end on the parent's timeline: a child published
		// by the cutoff is in the batch, one that ended after it is late
		// and is not, whenever the reduction ran.
		published, late := 0, 0
		for _, e := range f.events[v.ID] {
			if e.Type != "item_done" || e.Node != c.Node || e.Detail["child"] != nil {
				continue
			}
			switch e.Detail["state"] {
			case string(store.ItemPublished):
				published++
				if e.At.After(c.Cutoff) {
					bad = append(bad, fmt.Sprintf("run %s: item %v published at %v, after the cutoff %v", v.ID, e.Detail["item"], e.At, c.Cutoff))
				}
			case string(store.ItemLate):
				late++
				if e.At.Before(c.Cutoff) {
					bad = append(bad, fmt.Sprintf("run %s: item %v late at %v, before the cutoff %v", v.ID, e.Detail["item"], e.At, c.Cutoff))
				}
			}
		}
		if len(f.children[v.ID]) == 0 && len(out.Results) != published {
			bad = append(bad, fmt.Sprintf("run %s: %d results in the batch, %d children published by the cutoff %v", v.ID, len(out.Results), published, c.Cutoff))
		}
		if len(f.children[v.ID]) == 0 && len(out.Late) > late {
			bad = append(bad, fmt.Sprintf("run %s: %d late results in the result, %d children ended late", v.ID, len(out.Late), late))
		}
		w.counts["cohorts closed"]++
		w.counts["cohort results"] += len(out.Results)
		w.counts["cohort late"] += late
	}
	return bad
}

// completedAt is the time of a timeline's "completed" event.
func completedAt(evs []apitypes.Event) (time.Time, bool) {
	for _, e := range evs {
		if e.Type == "completed" {
			return e.At, true
		}
	}
	return time.Time{}, false
}

func countFlowPhase(f *final, flow string, p apitypes.Phase) int {
	n := 0
	for _, v := range f.runs {
		if v.Flow == flow && v.Phase == p {
			n++
		}
	}
	return n
}

// redrivePlanned is the redrive kind's planned failures (testkit.fail's
// times): more than its tries (retries = 1) fail.
const redrivePlanned = 3

// checkRedrives: in a run of the redrive kind each exhausted wait it
// parked on is redriven at most once (a redrive done twice would show two
// redriven events naming one wait), every redriven event names a wait the
// run parked on, and a run that completed was redriven — unless kills
// spent its planned failures unseen: a call cut by a kill may have failed
// in the plugin without the engine counting a try (its lease expired), so
// a run whose seen failures and cut calls reach the planned ones may get
// through alone.
// spentFailures counts what may have spent a planned failure of node's
// calls: the tries that failed (retry_scheduled) and the calls a kill cut
// (an expired lease of the node).
func spentFailures(evs []apitypes.Event, node string) int {
	n := 0
	for _, e := range evs {
		if e.Node == node && (e.Type == "retry_scheduled" || e.Type == "expired") {
			n++
		}
	}
	return n
}

func checkRedrives(w *world, f *final) []string {
	var out []string
	for _, v := range f.runs {
		if v.Flow != "soak_redrive" {
			continue
		}
		parked, redriven := map[string]bool{}, map[string]int{}
		for _, e := range f.events[v.ID] {
			wait := fmt.Sprint(e.Detail["wait"])
			switch {
			case e.Type == "waiting" && e.Detail["for"] == "exhausted":
				parked[wait] = true
			case e.Type == "redriven":
				if redriven[wait]++; redriven[wait] > 1 || !parked[wait] {
					out = append(out, fmt.Sprintf("run %s: wait %s redriven %d times, parked on: %v", v.ID, wait, redriven[wait], parked[wait]))
				}
			}
		}
		if v.Phase == apitypes.PhaseCompleted && len(redriven) == 0 && spentFailures(f.events[v.ID], "try") < redrivePlanned {
			out = append(out, fmt.Sprintf("run %s completed without a redrive: its tries cannot get through alone", v.ID))
		}
	}
	return out
}
