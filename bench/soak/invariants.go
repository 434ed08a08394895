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
		return fmt.Sprintf("%d runs accepted, every one in the store and terminal (or legitimately waiting)", acceptedCount(w))
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
		return fmt.Sprintf("%d fan-outs closed with a marker and a cutoff, %d children published before it, %d late; %d waits approved, %d subflow parents completed",
			w.counts["cohorts closed"], w.counts["cohort results"], w.counts["cohort late"], w.counts["approved"], countFlowPhase(f, "soak_sub", apitypes.PhaseCompleted))
	}},
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

// checkLost: every run the client was told about is in the store and ended
// (or waits on something that legitimately keeps it waiting).
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
		case v.Phase == apitypes.PhaseWaiting && s.kind.mayWait:
		case !v.Phase.Terminal():
			bad = append(bad, fmt.Sprintf("run %s (%s) still %s at attempt %d after the drain", v.ID, v.Flow, v.Phase, v.Attempt))
		}
	}
	return bad
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
// for a run that does not exist.
func checkMailOnce(w *world, f *final) []string {
	runs := byID(f)
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
		for _, e := range evs {
			task := taskOf(e)
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
			case "expired", "retry_scheduled", "waiting", "dropped", "drained", "item_done":
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
func taskOf(e *apitypes.Event) string {
	if t, ok := e.Detail["task"].(string); ok {
		return t
	}
	return "step"
}

// checkBudget: a budgeted run never spent more than its budget, and what
// the run record says it spent is what its timeline adds up to.
func checkBudget(w *world, f *final) []string {
	var bad []string
	for _, v := range f.runs {
		if v.Budget > 0 && v.Spent > v.Budget {
			bad = append(bad, fmt.Sprintf("run %s spent %d of a budget of %d", v.ID, v.Spent, v.Budget))
		}
		if v.Spent < 0 {
			bad = append(bad, fmt.Sprintf("run %s spent %d", v.ID, v.Spent))
		}
		var sum float64
		for _, e := range f.events[v.ID] {
			if e.Type == "node_completed" {
				sum += num(e.Detail["cost"])
			}
		}
		if int64(sum) != v.Spent {
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
		if v.Flow != "soak_fan" || v.Phase != apitypes.PhaseCompleted {
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
		w.counts["cohorts closed"]++
		w.counts["cohort results"] += len(out.Results)
		w.counts["cohort late"] += len(out.Late)
	}
	return bad
}

// completedAt is the time of a timeline's "completed" event.
func completedAt(evs []*apitypes.Event) (time.Time, bool) {
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
