package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/internal/failpoint"
	"github.com/weirhq/weir/runtime/store"
)

// CodeIncompatible refuses a migration whose run does not fit the version
// asked for; the message names each misfit (flows.CompatibleParked).
const CodeIncompatible = "E_INCOMPATIBLE"

// MigrateLatest is the one version a migration moves a run to today: the
// newest registered version of its flow.
const MigrateLatest = "latest"

// MaxMigrateReasonBytes bounds a migration's reason, journaled with it.
const MaxMigrateReasonBytes = MaxResolveReasonBytes

// evMigrated: a parked run moved to another version of its flow (from,
// to, who, why).
const evMigrated = "migrated"

// MigrateParams asks to move a parked run to another version of its flow.
type MigrateParams struct {
	// Owner is who asks; only the run's owner may (anyone else is told the
	// run does not exist, and the attempt is audited).
	Owner string
	RunID string
	// To is the version: MigrateLatest (or empty) is the only one.
	To string
	// Reason says why, journaled; By is who asks (default Owner).
	Reason string
	By     string
}

// MigrateResult is what a migration did: the run's version before and
// after; Migrated is false when it was on the latest version already.
type MigrateResult struct {
	RunID    string `json:"run_id"`
	Flow     string `json:"flow"`
	From     string `json:"from"`
	To       string `json:"to"`
	Migrated bool   `json:"migrated"`
}

// migrateTarget is what a migration read and checked: the run as it was,
// the position it was checked at and the version it moves to.
type migrateTarget struct {
	run      *store.Run
	position string
	to       string
}

// Migrate moves p.Owner's parked run p.RunID to the latest version of its
// flow, if its position and kept work fit it (flows.CompatibleParked:
// E_INCOMPATIBLE naming each misfit otherwise). A run that is not parked
// (store.PhaseWaiting) is refused with E_NOT_WAITING; one on the latest
// version already is answered as it is, unchanged. The new version and a
// migrated event naming both versions, who and why, are one transaction,
// which checks again that the run has not moved since it was checked: done
// once or not at all. The run stays parked where it was; what it does next
// it does under the new version.
func (o *Ops) Migrate(ctx context.Context, p MigrateParams) (*MigrateResult, error) {
	e := o.e
	if err := checkMigrate(&p); err != nil {
		return nil, err
	}
	var tgt migrateTarget
	var c *continuation
	var refusal *Error
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		tgt, c, refusal, err = migrateTargetTx(tx, p)
		return err
	})
	if err := answerRefused(ctx, e, p.Owner, p.RunID, "migrate", err, refusal, true); err != nil {
		return nil, err
	}
	res := &MigrateResult{RunID: tgt.run.ID, Flow: tgt.run.Flow, From: tgt.run.Version, To: tgt.to}
	if tgt.to == tgt.run.Version {
		return res, nil
	}
	if err := o.migrateFits(ctx, tgt, c); err != nil {
		return nil, err
	}
	now := e.clock.Now()
	var moved bool
	err = e.st.Update(ctx, func(tx store.Tx) error {
		var err error
		moved, refusal, err = migrateTx(tx, p, tgt, now)
		if err == nil {
			failpoint.Hit(failpoint.BeforeMigrate)
		}
		return err
	})
	if err := answerRefused(ctx, e, p.Owner, p.RunID, "migrate", err, refusal, false); err != nil {
		return nil, err
	}
	failpoint.Hit(failpoint.AfterMigrate)
	res.Migrated = moved
	if !moved {
		res.From = tgt.to // another daemon's migration moved it first
	}
	return res, nil
}

// checkMigrate refuses a malformed migration before anything is read.
func checkMigrate(p *MigrateParams) error {
	if p.To == "" {
		p.To = MigrateLatest
	}
	if p.To != MigrateLatest {
		return protocolErr(CodeBadRequest, "version %q: a run migrates to %q, the newest version of its flow", textbound.Quote(p.To), MigrateLatest)
	}
	if err := CheckPrintable("reason", p.Reason, MaxMigrateReasonBytes); err != nil {
		return err
	}
	if p.By == "" {
		p.By = p.Owner
	}
	return nil
}

// migrateTargetTx reads p's run and the latest version of its flow, or
// why the run cannot move: another owner's (errNotYours), not parked.
func migrateTargetTx(tx store.Tx, p MigrateParams) (migrateTarget, *continuation, *Error, error) {
	run, c, t, refusal, err := parkedRunTx(tx, p.Owner, p.RunID, "")
	if err != nil {
		if refusal != nil {
			refusal = notParkedForMigrate(p.RunID, run)
		}
		return migrateTarget{}, nil, refusal, err
	}
	if refusal := migratable(run, t); refusal != nil {
		return migrateTarget{}, nil, refusal, errSkip
	}
	latest, err := tx.FlowVersionLatest(run.Flow)
	if err != nil {
		return migrateTarget{}, nil, nil, err
	}
	return migrateTarget{run: run, position: parkedPosition(c), to: latest.Hash}, c, nil, nil
}

// migratable refuses a run that is not parked: only a run that waits, its
// step task parked (not being resumed), may change version.
func migratable(run *store.Run, t *store.Task) *Error {
	if run.Phase != store.PhaseWaiting || t == nil {
		return notParkedForMigrate(run.ID, run)
	}
	if t.Leased || t.WaitKind == "" {
		return protocolErr(CodeNotWaiting, "run %s is being resumed now: a run migrates only while it is parked; nothing was changed (try again once it parks)", run.ID)
	}
	return nil
}

func notParkedForMigrate(id string, run *store.Run) *Error {
	phase := "not parked"
	if run != nil {
		phase = string(run.Phase)
	}
	return protocolErr(CodeNotWaiting, "run %s is %s: only a parked run (phase waiting) can migrate to another version; nothing was changed", id, phase)
}

// migrateFits checks the run's position and kept work against the version
// it moves to, outside every transaction.
func (o *Ops) migrateFits(ctx context.Context, tgt migrateTarget, c *continuation) error {
	old, err := o.e.book.version(ctx, tgt.run.Flow, tgt.run.Version)
	if err != nil {
		return o.e.admission.readFailed(err)
	}
	to, err := o.e.book.version(ctx, tgt.run.Flow, tgt.to)
	if err != nil {
		return o.e.admission.readFailed(err)
	}
	at, done, waits := parkedHeld(c)
	misfits := flows.CompatibleParked(old.flow, to.flow, at, done, waits)
	kept := misfits[:0]
	for _, m := range misfits {
		if !o.answerFits(ctx, &m, c, to.flow) {
			kept = append(kept, m)
		}
	}
	misfits = kept
	if len(misfits) == 0 {
		return nil
	}
	var l textbound.List
	for _, m := range misfits {
		l.Add(m.String())
	}
	return protocolErr(CodeIncompatible, "run %s cannot go on under flow %s's latest version %s: %s; it stays on its version %s, nothing was changed",
		tgt.run.ID, tgt.run.Flow, shortHash(tgt.to), l.Join("; "), shortHash(tgt.run.Version))
}

// answerFits checks the answer the run keeps of an agent node whose
// output_schema changed (m.Schema) against the new schema: an answer
// that satisfies it fits; one that does not says why in m.
func (o *Ops) answerFits(ctx context.Context, m *flows.Misfit, c *continuation, to *flows.Flow) bool {
	if !m.Schema {
		return false
	}
	var kept struct {
		Answer json.RawMessage `json:"answer"`
	}
	n := to.Node(m.Node)
	if n == nil || json.Unmarshal(c.Results[m.Node], &kept) != nil || len(kept.Answer) == 0 {
		return false
	}
	vctx, cancel := context.WithTimeout(ctx, resultCheckTimeout)
	defer cancel()
	if err := o.e.book.validateSchema(vctx, n.OutputSchema, kept.Answer); err != nil {
		m.Why = "its answer does not satisfy the new version's output_schema: " + clip(err.Error())
		return false
	}
	return true
}

// migrateTx moves the run to tgt.to if it is where it was checked: still
// parked, on the version and at the position checked, and tgt.to still
// the latest. A run already on tgt.to (another daemon's migration of the
// same run committed first) is left as it is: moved is false.
func migrateTx(tx store.Tx, p MigrateParams, tgt migrateTarget, now time.Time) (moved bool, _ *Error, _ error) {
	cur, _, refusal, err := migrateTargetTx(tx, p)
	if err != nil {
		return false, refusal, err
	}
	if cur.run.Version == tgt.to && cur.to == tgt.to {
		return false, nil, nil
	}
	if cur.run.Version != tgt.run.Version || cur.position != tgt.position || cur.to != tgt.to {
		return false, protocolErr(CodeNotWaiting, "run %s moved while its migration was checked (another version, position or latest version); nothing was changed: try again", p.RunID), errSkip
	}
	run := cur.run
	run.Version, run.UpdatedAt = tgt.to, now
	if err := tx.RunUpdate(run); err != nil {
		return false, nil, err
	}
	return true, nil, appendEvent(tx, run.ID, evMigrated, run.Attempt, "", map[string]any{
		"from": tgt.run.Version, "to": tgt.to, "by": p.By, "reason": p.Reason}, now)
}
