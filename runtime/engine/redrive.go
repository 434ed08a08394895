package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// Dead letters after the fact (DESIGN §12, operations on runs): a task
// that used up its retries on a node that says on_exhausted = "park" is
// dead-lettered and its run parks on an exhausted wait; a redrive sends
// the task back to the queue, through admission like any work, with its
// tries counted afresh and the same idempotency key (the call's key is
// its run, node and visit, which a redrive does not change). A run that
// ended is never reopened: finishing is one decision.

// Codes of dead-letter operations.
const (
	// CodeRunEnded: the dead letter's run has ended, so it cannot be
	// redriven; a fork starts it again from the node.
	CodeRunEnded = "E_RUN_ENDED"
	// CodeNotDead: the task is not dead-lettered (it was redriven
	// already, or never used up its tries).
	CodeNotDead = "E_NOT_DEAD"
)

// MaxRedriveBatch bounds the dead letters one redrive names or selects;
// a selector that matches more redrives the oldest and says there are
// more (RedriveAnswer.More).
const MaxRedriveBatch = 1000

// MaxRedriveReasonBytes bounds a redrive's reason, which is journaled on
// every run it redrives.
const MaxRedriveReasonBytes = 1024

// exhaustCount numbers the exhausted waits of a node's visit: a redriven
// task that is exhausted again parks on a wait of a new id.
type exhaustCount struct {
	Visit int `json:"visit"`
	N     int `json:"n"`
}

// ExhaustedWaitID is the id of the n-th exhausted wait of visit of node:
// NODE@VISIT.exhausted.N (DESIGN §12, wait ids per kind).
func ExhaustedWaitID(node string, visit, n int) string {
	return WaitID(node, visit) + "." + WaitExhausted + "." + strconv.Itoa(n)
}

// exhaustedWaitIDAt is the id of the n-th exhausted wait of the call
// placed by base, a wait id: BASE.exhausted.N (a fan-out item's base is
// NODE@VISIT.ITEM).
func exhaustedWaitIDAt(base string, n int) string {
	return base + "." + WaitExhausted + "." + strconv.Itoa(n)
}

// parkExhausted dead-letters t (the step's task with every try's error)
// and parks the run on a new exhausted wait, in one transaction.
func (s *stepper) parkExhausted(ctx context.Context, node *flows.Node, t *store.Task, tool string, o callOutcome) bool {
	now := s.e.clock.Now()
	visit := s.cont.Visits[node.ID]
	if s.cont.Exhausted == nil {
		s.cont.Exhausted = map[string]exhaustCount{}
	}
	n := s.cont.Exhausted[node.ID]
	if n.Visit != visit {
		n = exhaustCount{Visit: visit}
	}
	n.N++
	s.cont.Exhausted[node.ID] = n
	if s.cont.Waits == nil {
		s.cont.Waits = map[string]*waitState{}
	}
	ws := &waitState{ID: ExhaustedWaitID(node.ID, visit, n.N), Kind: WaitExhausted, Node: node.ID, Since: now, Until: now.Add(noTimeout),
		Shown: mustJSON(map[string]any{"task": t.ID, "tool": tool, "tries": len(t.Errors), "error": o.Err})}
	s.cont.Waits[node.ID] = ws
	ok := s.commit(ctx, func(tx store.Tx) error {
		if err := s.e.journal.deadLetterTx(tx, s.run, t, tool); err != nil {
			return err
		}
		return s.parkTx(tx, now, ws.Until, WaitExhausted, "", map[string]any{"wait": ws.ID, "code": o.Err.Code, "message": o.Err.Message})
	})
	if ok {
		s.e.stats.deadLettered()
		failpoint.Hit(failpoint.ExhaustedParked)
	}
	return false
}

// stillExhausted parks the run again when its task woke at node while
// still parked on an exhausted wait (a wake that was not a redrive): only
// a redrive, which removes the wait, sends the node to its tool again.
func (s *stepper) stillExhausted(ctx context.Context, node *flows.Node) bool {
	ws := s.cont.Waits[node.ID]
	if ws == nil || ws.Kind != WaitExhausted {
		return false
	}
	now := s.e.clock.Now()
	s.commit(ctx, func(tx store.Tx) error {
		return s.parkTx(tx, now, ws.Until, WaitExhausted, "", map[string]any{"wait": ws.ID})
	})
	return true
}

// exhaustedWaits lists run's open exhausted wait, for the waits a person
// must act on (HumanWaits): it is open while the step task t is parked.
func exhaustedWaits(run *store.Run, c *continuation, t *store.Task) []HumanWait {
	if t == nil || t.Leased || t.WaitKind != WaitExhausted {
		return nil
	}
	ws := c.Waits[t.Node]
	if ws == nil || ws.Kind != WaitExhausted {
		return nil
	}
	return []HumanWait{{ID: ws.ID, Kind: ws.Kind, RunID: run.ID, Flow: run.Flow, Node: ws.Node, Since: ws.Since, Until: ws.Until, Shown: ws.Shown}}
}

// Now is the engine's clock, which a since given as a duration back from
// now is measured by (the daemon's, not the client's).
func (o *Ops) Now() time.Time { return o.e.clock.Now() }

// DeadLetterParams selects an owner's dead letters (Ops.DeadLetterList).
type DeadLetterParams struct {
	Owner string
	// Flow and Tool keep those of that flow, of that tool; Since those
	// dead-lettered at or after it. Zero: no filter.
	Flow, Tool string
	Since      time.Time
	// Limit bounds the answer (0: no bound).
	Limit int
}

// DeadLetterList lists p.Owner's dead letters that match p, oldest first.
func (o *Ops) DeadLetterList(ctx context.Context, p DeadLetterParams) ([]*store.DeadLetter, error) {
	var out []*store.DeadLetter
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.DeadLetterList(store.DeadLetterListParams{Owner: p.Owner, Flow: p.Flow, Tool: p.Tool, Since: p.Since, Limit: p.Limit})
		return err
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return out, nil
}

// DeadLetter is owner's dead letter of task taskID with its run, as it is
// now (nil if retention pruned it). Another owner's is E_NOT_FOUND, and
// audited.
func (o *Ops) DeadLetter(ctx context.Context, owner, taskID string) (*store.DeadLetter, *store.Run, error) {
	var dl *store.DeadLetter
	var run *store.Run
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		if dl, err = tx.DeadLetterGet(taskID); err != nil {
			return err
		}
		if dl.Owner != owner {
			return errNotYours
		}
		run, err = tx.RunGet(dl.RunID)
		if errors.Is(err, store.ErrNotFound) {
			run, err = nil, nil
		}
		return err
	})
	switch {
	case errors.Is(err, errNotYours):
		o.e.auditor.foreign(ctx, owner, taskID, "deadletter get")
		return nil, nil, protocolErr(CodeNotFound, "no dead letter of task %s", taskID)
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, protocolErr(CodeNotFound, "no dead letter of task %s", taskID)
	case err != nil:
		return nil, nil, o.e.admission.readFailed(err)
	}
	return dl, run, nil
}

// RedriveParams names the dead letters to send back: TaskIDs, or the
// owner's dead letters of a Flow and/or a Tool, or All of them (those
// selectors may add Since). Exactly one way of naming them is allowed.
type RedriveParams struct {
	Owner   string
	TaskIDs []string
	Flow    string
	Tool    string
	All     bool
	Since   time.Time
	// By is who redrives (default Owner) and Reason why; both are
	// journaled on each run as its redriven event.
	By     string
	Reason string
	// RequestID is the client's id of the request, journaled with each
	// redrive (a reserved prefix is refused, E_BAD_REQUEST_ID). A retry of
	// a request that was done finds the tasks not dead (E_NOT_DEAD).
	RequestID string
}

// RedriveResult is the answer for one dead letter: redriven, or refused
// with Err (its code says why).
type RedriveResult struct {
	TaskID string
	RunID  string
	Node   string
	// Wait is the exhausted wait the redrive decided.
	Wait     string
	Redriven bool
	Err      *Error
}

// RedriveAnswer is a redrive's answer, one result per dead letter in the
// order named or listed.
type RedriveAnswer struct {
	Results []RedriveResult
	// More says a selector matched more than MaxRedriveBatch dead letters:
	// send it again for the rest.
	More bool
}

// Redrive sends the dead letters p names back to the queue, each in its
// own transaction (done once or not at all): the dead letter deleted, the
// run's exhausted wait decided and consumed, the task ready with its
// tries counted afresh, and a redriven event with who and why. Each is
// admitted like new work within its owner's share (E_QUEUE_FULL,
// E_OWNER_QUOTA, E_OWNER_BUDGET refuse it and the others go on) and its
// run's budget is checked again (E_BUDGET_EXHAUSTED). A run that ended is
// E_RUN_ENDED; another owner's dead letter is E_NOT_FOUND, audited. A
// malformed request is refused whole, before anything changes.
func (o *Ops) Redrive(ctx context.Context, p RedriveParams) (*RedriveAnswer, error) {
	ids, more, err := o.redriveSelection(ctx, p)
	if err != nil {
		return nil, err
	}
	if p.By == "" {
		p.By = p.Owner
	}
	ans := &RedriveAnswer{More: more, Results: make([]RedriveResult, len(ids))}
	// Admission goes in the order named, so which of a batch too large
	// for the owner's share are refused is the later ones; the admitted
	// ones then commit side by side, each in its own transaction, which
	// the store's group commit makes durable together.
	pres := make([]*redrivePreview, len(ids))
	for i, id := range ids {
		if ctx.Err() != nil {
			o.unreserve(pres[:i])
			return nil, protocolErr(CodeBadRequest, "request abandoned after %d of %d redrives were admitted: %v", i, len(ids), ctx.Err())
		}
		ans.Results[i], pres[i] = o.redriveAdmit(ctx, p.Owner, id)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, redriveCommitters)
	for i := range ids {
		if pres[i] == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			o.redriveCommit(ctx, p, pres[i], &ans.Results[i])
		})
	}
	wg.Wait()
	return ans, nil
}

// redriveCommitters bounds the redrive transactions one request has in
// flight at once.
const redriveCommitters = 16

// unreserve gives back the queue places of admitted redrives that will
// not be made.
func (o *Ops) unreserve(pres []*redrivePreview) {
	for _, pre := range pres {
		if pre != nil {
			o.e.queued.remove(pre.run.ID)
		}
	}
}

// redriveSelection checks p and lists the task ids it names.
func (o *Ops) redriveSelection(ctx context.Context, p RedriveParams) ([]string, bool, error) {
	if err := CheckRequestID(p.RequestID); err != nil {
		return nil, false, err
	}
	if err := CheckPrintable("reason", p.Reason, MaxRedriveReasonBytes); err != nil {
		return nil, false, err
	}
	selectors := p.Flow != "" || p.Tool != ""
	switch {
	case len(p.TaskIDs) > 0 && (selectors || p.All):
		return nil, false, protocolErr(CodeBadRequest, "name dead letters by task id, or select them by flow, tool or all: not both")
	case len(p.TaskIDs) > 0 && !p.Since.IsZero():
		return nil, false, protocolErr(CodeBadRequest, "since selects dead letters by flow, tool or all; tasks named by id need none")
	case selectors && p.All:
		return nil, false, protocolErr(CodeBadRequest, "all redrives every dead letter: leave out flow and tool, or all")
	case len(p.TaskIDs) == 0 && !selectors && !p.All:
		return nil, false, protocolErr(CodeBadRequest, "name the dead letters to redrive: task ids, a flow, a tool, or all")
	case len(p.TaskIDs) > MaxRedriveBatch:
		return nil, false, protocolErr(CodeBadRequest, "%d task ids: one redrive names at most %d", len(p.TaskIDs), MaxRedriveBatch)
	}
	if len(p.TaskIDs) > 0 {
		seen := map[string]bool{}
		var ids []string
		for _, id := range p.TaskIDs {
			if err := CheckPrintable("task id", id, MaxIDBytes); err != nil || id == "" {
				return nil, false, protocolErr(CodeBadRequest, "task id %q is not one weir gives: non-empty printable text of at most %d bytes", clip(id), MaxIDBytes)
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		return ids, false, nil
	}
	dls, err := o.DeadLetterList(ctx, DeadLetterParams{Owner: p.Owner, Flow: p.Flow, Tool: p.Tool, Since: p.Since, Limit: MaxRedriveBatch + 1})
	if err != nil {
		return nil, false, err
	}
	more := len(dls) > MaxRedriveBatch
	ids := make([]string, 0, min(len(dls), MaxRedriveBatch))
	for _, d := range dls[:min(len(dls), MaxRedriveBatch)] {
		ids = append(ids, d.TaskID)
	}
	return ids, more, nil
}

// clip bounds an id quoted back in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// redriveAdmit is the first half of one redrive: the preview (which
// refuses early what the transaction would refuse anyway) and admission
// (the gate, the disk, the owner's spend and its share of the queue). It
// returns the preview of an admitted redrive, nil for a refused one
// (whose result holds the refusal).
func (o *Ops) redriveAdmit(ctx context.Context, owner, taskID string) (RedriveResult, *redrivePreview) {
	res := RedriveResult{TaskID: taskID}
	pre, refusal := o.redrivePreview(ctx, owner, taskID)
	if refusal != nil {
		res.Err = refusal
		return res, nil
	}
	res.RunID, res.Node = pre.dl.RunID, pre.dl.Node
	if err := o.admitRedrive(ctx, pre.run); err != nil {
		res.Err = err
		return res, nil
	}
	pre.taskID = taskID
	return res, &pre
}

// redriveCommit is the second half: the one transaction; a refused or
// failed transaction gives the reservation back.
func (o *Ops) redriveCommit(ctx context.Context, p RedriveParams, pre *redrivePreview, res *RedriveResult) {
	e := o.e
	taskID := pre.taskID
	now := e.clock.Now()
	var refusal *Error
	err := e.st.Update(ctx, func(tx store.Tx) error {
		var err error
		res.Wait, refusal, err = redriveTx(tx, p, taskID, pre.cost, now)
		return err
	})
	switch {
	case errors.Is(err, errNotYours):
		e.queued.remove(pre.run.ID)
		e.auditor.foreign(ctx, p.Owner, taskID, "redrive")
		res.Err = protocolErr(CodeNotFound, "no dead letter of task %s", taskID)
		return
	case refusal != nil:
		e.queued.remove(pre.run.ID)
		res.Err = refusal
		return
	case err != nil:
		e.queued.remove(pre.run.ID)
		res.Err = e.admission.storageFailed(err)
		return
	}
	failpoint.Hit(failpoint.AfterRedrive)
	res.Redriven = true
	e.wake.kick()
}

// redrivePreview is what a redrive reads before it is admitted: the dead
// letter, its run and what the node's next try will cost. It refuses
// early what the transaction would refuse anyway, without a reservation.
type redrivePreview struct {
	taskID string
	dl     *store.DeadLetter
	run    *store.Run
	cost   int64
}

func (o *Ops) redrivePreview(ctx context.Context, owner, taskID string) (redrivePreview, *Error) {
	var pre redrivePreview
	var refusal *Error
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		pre.dl, pre.run, refusal, err = redriveTargetTx(tx, owner, taskID)
		return err
	})
	switch {
	case errors.Is(err, errNotYours):
		o.e.auditor.foreign(ctx, owner, taskID, "redrive")
		return pre, protocolErr(CodeNotFound, "no dead letter of task %s", taskID)
	case refusal != nil:
		return pre, refusal
	case err != nil:
		return pre, o.e.admission.readFailed(err)
	}
	if fe, err := o.e.book.version(ctx, pre.run.Flow, pre.run.Version); err == nil {
		if n := fe.flow.Node(pre.dl.Node); n != nil {
			pre.cost = o.e.book.nodeCost(n)
		}
	}
	return pre, nil
}

// admitRedrive admits a redriven task's run as admission admits a start:
// the gate open, the disk not full, the owner's budget_per_hour not spent,
// and a place in the queue within the daemon's max_queued and the owner's
// own (the reservation is taken back when the task is leased, as a new
// run's is). An owner's max_running is not asked: the run is started.
func (o *Ops) admitRedrive(ctx context.Context, run *store.Run) *Error {
	e := o.e
	if err := e.admission.enter(); err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			return ae
		}
		return storageErr(err)
	}
	defer e.admission.leave()
	if err := e.admission.checkDisk(); err != nil {
		return err
	}
	cfg := e.cfg.Load()
	share := cfg.ShareOf(run.Owner)
	if share.BudgetPerHour > 0 {
		var refusal *Error
		if err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			refusal, err = e.owners.checkTx(tx, run.Owner, share, false)
			return err
		}); err != nil {
			return storageErr(err)
		}
		if refusal != nil {
			return refusal
		}
	}
	switch e.queued.reserve(run.ID, run.Owner, cfg.MaxQueued, share.MaxQueued) {
	case CodeQueueFull:
		e.stats.refused(CodeQueueFull)
		err := protocolErr(CodeQueueFull, "%d runs are already queued (max_queued); redrive again later", cfg.MaxQueued)
		err.RetryAfter = OwnerQuotaRetryAfter
		return err
	case CodeOwnerQuota:
		e.stats.refused(CodeOwnerQuota)
		return ownerQueuedErr(run.Owner, share.MaxQueued)
	}
	return nil
}

// redriveTargetTx reads the dead letter of taskID and its run, or says
// why it cannot be redriven: another owner's (errNotYours), not dead, its
// run ended or pruned.
func redriveTargetTx(tx store.Tx, owner, taskID string) (*store.DeadLetter, *store.Run, *Error, error) {
	dl, err := tx.DeadLetterGet(taskID)
	if errors.Is(err, store.ErrNotFound) {
		if t, terr := tx.TaskGet(taskID); terr == nil {
			if run, rerr := tx.RunGet(t.RunID); rerr == nil && run.Owner == owner {
				return nil, nil, protocolErr(CodeNotDead, "task %s of run %s is not dead-lettered: it was redriven already, or never used up its tries", taskID, run.ID), errSkip
			}
		}
		return nil, nil, nil, errNotYours
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if dl.Owner != owner {
		return nil, nil, nil, errNotYours
	}
	run, err := tx.RunGet(dl.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, protocolErr(CodeNotFound, "the run %s of dead letter %s is gone (retention pruned it); nothing can be redriven", dl.RunID, taskID), errSkip
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if run.Phase.Terminal() {
		return nil, nil, protocolErr(CodeRunEnded, "run %s has ended (%s) and a redrive never reopens an ended run; start it again from the node with `weir run fork %s --from %s`",
			run.ID, run.Phase, run.ID, dl.Node), errSkip
	}
	return dl, run, nil, nil
}

// redriveTx applies one redrive in tx, or answers why it is refused (with
// errSkip): the dead letter deleted, the exhausted wait decided and
// consumed, the tries counted afresh, the task ready now, the event.
func redriveTx(tx store.Tx, p RedriveParams, taskID string, cost int64, now time.Time) (string, *Error, error) {
	dl, run, refusal, err := redriveTargetTx(tx, p.Owner, taskID)
	if err != nil || refusal != nil {
		return "", refusal, err
	}
	raw, err := tx.ContinuationGet(run.ID)
	if err != nil {
		return "", nil, err
	}
	c, err := decodeContinuation(raw)
	if err != nil {
		return "", nil, err
	}
	t, err := tx.TaskGet(taskID)
	if errors.Is(err, store.ErrNotFound) {
		return "", notParked(run, dl), errSkip
	}
	if err != nil {
		return "", nil, err
	}
	if t.Kind == store.TaskItem {
		return redriveItemTx(tx, p, dl, run, c, t, cost, now)
	}
	ws := c.Waits[dl.Node]
	switch {
	case ws == nil || ws.Kind != WaitExhausted || t.Kind != store.TaskStep:
		return "", notParked(run, dl), errSkip
	case t.Leased:
		return "", protocolErr(CodeNotWaiting, "run %s is being resumed at node %s; redrive again in a moment", run.ID, dl.Node), errSkip
	case run.Budget > 0 && run.Spent+cost > run.Budget:
		return "", protocolErr(CodeBudgetExhausted, "run %s has spent %d of its budget %d and node %s costs %d: a redrive would be refused its next try",
			run.ID, run.Spent, run.Budget, dl.Node, cost), errSkip
	}
	if err := tx.DeadLetterDelete(taskID); err != nil {
		return "", nil, err
	}
	ws.Decision = &decision{Approved: true, Reason: p.Reason, By: p.By, At: now}
	c.consumed(ws)
	delete(c.Waits, dl.Node)
	c.Tries = 0
	if err := tx.ContinuationPut(run.ID, encodeContinuation(c)); err != nil {
		return "", nil, err
	}
	t.Errors, t.WaitKind, t.Woken, t.ReadyAt = nil, "", false, now
	if err := tx.TaskPut(t); err != nil {
		return "", nil, err
	}
	return ws.ID, nil, redrivenEventTx(tx, p, dl, run, ws.ID, nil, now)
}

// redrivenEventTx journals the redrive of dl on its run, from wait id
// (and, for a fan-out item, its index).
func redrivenEventTx(tx store.Tx, p RedriveParams, dl *store.DeadLetter, run *store.Run, wait string, item *int, now time.Time) error {
	detail := map[string]any{"by": p.By, "task": dl.TaskID, "wait": wait, "dead_lettered_at": dl.At, "tries": len(dl.Errors)}
	if item != nil {
		detail["item"] = *item
	}
	if p.Reason != "" {
		detail["reason"] = p.Reason
	}
	if p.RequestID != "" {
		detail["request_id"] = p.RequestID
	}
	return appendEvent(tx, run.ID, evRedriven, run.Attempt, dl.Node, detail, now)
}

// redriveItemTx is redriveTx for a fan-out item's task t, parked on its
// exhaustion (on_exhausted = "park"): the dead letter deleted, the item's
// exhausted wait decided and consumed (numbered here if the parent has not
// opened it yet), the item no longer exhausted, its task's tries counted
// afresh and ready now. The parent's step must be parked: it owns the
// continuation the wait lives in.
func redriveItemTx(tx store.Tx, p RedriveParams, dl *store.DeadLetter, run *store.Run, c *continuation, t *store.Task, cost int64, now time.Time) (string, *Error, error) {
	co, err := tx.CohortGet(run.ID, t.Node, t.Visit)
	if errors.Is(err, store.ErrNotFound) {
		return "", notParked(run, dl), errSkip
	}
	if err != nil {
		return "", nil, err
	}
	it, err := tx.CohortItemGet(run.ID, t.Node, t.Visit, t.Item)
	if err != nil {
		return "", nil, err
	}
	step, err := stepTaskTx(tx, run.ID)
	if err != nil {
		return "", nil, err
	}
	switch {
	case t.WaitKind != WaitExhausted || it.Child != t.ID || !slices.Contains(co.Exhausted, t.Item):
		return "", notParked(run, dl), errSkip
	case t.Leased || step == nil || step.Leased:
		return "", protocolErr(CodeNotWaiting, "run %s is being resumed at node %s; redrive again in a moment", run.ID, dl.Node), errSkip
	case run.Budget > 0 && run.Spent+cost > run.Budget:
		return "", protocolErr(CodeBudgetExhausted, "run %s has spent %d of its budget %d and an item of node %s costs %d: a redrive would be refused its next try",
			run.ID, run.Spent, run.Budget, dl.Node, cost), errSkip
	}
	if err := tx.DeadLetterDelete(t.ID); err != nil {
		return "", nil, err
	}
	base := WaitID(t.Node, t.Visit, t.Item)
	n := c.Exhausted[base]
	ws := c.Approvals[exhaustedWaitIDAt(base, n.N)]
	if ws == nil || ws.Kind != WaitExhausted {
		if c.Exhausted == nil {
			c.Exhausted = map[string]exhaustCount{}
		}
		n.Visit, n.N = t.Visit, n.N+1
		c.Exhausted[base] = n
		ws = &waitState{ID: exhaustedWaitIDAt(base, n.N), Kind: WaitExhausted, Node: t.Node, Visit: t.Visit, Call: []int{t.Item}}
	}
	ws.Decision = &decision{Approved: true, Reason: p.Reason, By: p.By, At: now}
	c.consumed(ws)
	delete(c.Approvals, ws.ID)
	if err := tx.ContinuationPut(run.ID, encodeContinuation(c)); err != nil {
		return "", nil, err
	}
	co.Exhausted = slices.DeleteFunc(co.Exhausted, func(i int) bool { return i == t.Item })
	if err := tx.CohortPut(co); err != nil {
		return "", nil, err
	}
	it.Error = nil
	if err := tx.CohortItemPut(it); err != nil {
		return "", nil, err
	}
	t.Errors, t.WaitKind, t.Woken, t.ReadyAt = nil, "", false, now
	if err := tx.TaskPut(t); err != nil {
		return "", nil, err
	}
	return ws.ID, nil, redrivenEventTx(tx, p, dl, run, ws.ID, &t.Item, now)
}

// notParked refuses the redrive of a dead letter whose run went on
// without it (the node took its error wire, or it was a fan-out item's).
func notParked(run *store.Run, dl *store.DeadLetter) *Error {
	return protocolErr(CodeNotWaiting, "run %s is not parked on the exhaustion of task %s at node %s (a node parks with on_exhausted = \"park\"; this one went on without it): start it again from the node with `weir run fork %s --from %s`",
		run.ID, dl.TaskID, dl.Node, run.ID, dl.Node)
}

// evRedriven: a dead letter was sent back to the queue (who, why).
const evRedriven = "redriven"
