package engine

import (
	"context"
	"errors"

	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
)

// Get returns a run of owner. A run of another owner is answered exactly
// like a missing one (E_NOT_FOUND) and audited. A run whose finish
// decision is made but not yet recorded shows phase "completing".
func (e *Engine) Get(ctx context.Context, owner, runID string) (*store.Run, error) {
	var run *store.Run
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		run, err = tx.RunGet(runID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && run.Owner != owner) {
		if err == nil {
			e.auditor.foreign(ctx, owner, runID, "get")
		}
		return nil, protocolErr(CodeNotFound, "no run %s", runID)
	}
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	if lr := e.held.run(runID); lr != nil && !run.Phase.Terminal() {
		if lr.isCompleting() {
			run.Phase = store.PhaseCompleting
		}
	}
	return run, nil
}

// List returns owner's runs in the order p asks (id, or newest first).
func (e *Engine) List(ctx context.Context, owner string, p store.RunListParams) ([]*store.Run, error) {
	p.Owner = owner
	var runs []*store.Run
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		runs, err = tx.RunList(p)
		return err
	})
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	return runs, nil
}

// Events returns the timeline of owner's run after seq.
func (e *Engine) Events(ctx context.Context, owner, runID string, afterSeq uint64, limit int) ([]*store.Event, error) {
	if _, err := e.Get(ctx, owner, runID); err != nil {
		return nil, err
	}
	var evs []*store.Event
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: runID, AfterSeq: afterSeq, Limit: limit})
		return err
	})
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	return evs, nil
}

// GetByRequestID returns owner's run that a start with requestID created,
// through the dedup record keyed by (owner, request id): the key holds
// the owner, so another owner's run with the same request id is never
// found. No such start, or a run no longer kept, is E_NOT_FOUND. The id
// is held to what a store key takes (printable, at most MaxBytes), not to
// what a start may send: the runs the daemon starts itself, under the
// reserved prefixes, are found too.
func (e *Engine) GetByRequestID(ctx context.Context, owner, requestID string) (*store.Run, error) {
	if err := CheckPrintable("request id", requestID, requestid.MaxBytes); err != nil {
		return nil, err
	}
	var d *store.Dedup
	err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		d, err = tx.DedupGet(owner, requestID)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocolErr(CodeNotFound, "no run with request id %q", requestID)
	}
	if err != nil {
		return nil, e.admission.readFailed(err)
	}
	return e.Get(ctx, owner, d.RunID)
}
