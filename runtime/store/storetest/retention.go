package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

func testRetention(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error {
		for _, run := range []string{"old", "oldish", "keep"} {
			for range 3 {
				if err := tx.EventAppend(&store.Event{RunID: run, At: t0, Type: "x"}); err != nil {
					return err
				}
			}
			if err := tx.IdemPut(&store.Idem{Key: run + "/n/1", RunID: run, State: store.IdemDone}); err != nil {
				return err
			}
			if err := tx.CohortPut(&store.Cohort{RunID: run, Node: "f", Visit: 1}); err != nil {
				return err
			}
			if err := tx.CohortItemPut(&store.CohortItem{RunID: run, Node: "f", Visit: 1, Index: 0}); err != nil {
				return err
			}
		}
		// "oldish" shares a prefix with "old": deleting old's must spare it.
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		recs, err := tx.IdemListRun("old")
		if err != nil {
			return err
		}
		if len(recs) != 1 || recs[0].Key != "old/n/1" {
			return fmt.Errorf("IdemListRun(old) = %d records, want only old/n/1", len(recs))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		return first(tx.EventDeleteRun("old"), tx.CohortDeleteRun("old"), tx.IdemDeleteRun("old"))
	})
	view(t, s, func(tx store.Tx) error {
		for _, run := range []string{"old", "oldish", "keep"} {
			evs, err := tx.EventList(store.EventListParams{RunID: run})
			if err != nil {
				return err
			}
			_, ierr := tx.IdemGet(run + "/n/1")
			_, cerr := tx.CohortGet(run, "f", 1)
			items, err := tx.CohortItemList(run, "f", 1)
			if err != nil {
				return err
			}
			gone := run == "old"
			if gone != (len(evs) == 0) || gone != (ierr != nil) || gone != (cerr != nil) || gone != (len(items) == 0) {
				return fmt.Errorf("run %s: events %d idem %v cohort %v items %d; want all gone only for run old", run, len(evs), ierr, cerr, len(items))
			}
		}
		return nil
	})
	// RunList by finish time.
	update(t, s, func(tx store.Tx) error {
		for i, fin := range []time.Time{at(time.Second), at(time.Hour), {}} {
			r := &store.Run{ID: fmt.Sprint("f", i), Flow: "f", Owner: "o", Phase: store.PhaseCompleted, FinishedAt: fin, CreatedAt: t0}
			if fin.IsZero() {
				r.Phase = store.PhaseRunning
			}
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		runs, err := tx.RunList(store.RunListParams{Phase: store.PhaseCompleted, FinishedBefore: at(time.Minute)})
		if err != nil {
			return err
		}
		if len(runs) != 1 || runs[0].ID != "f0" {
			return fmt.Errorf("finished before a minute: %d runs, want only f0", len(runs))
		}
		return nil
	})
}

// testEventDeleteBefore: only the events of the named stream below the
// sequence number go; a stream sharing its name's prefix keeps all of its.
func testEventDeleteBefore(t *testing.T, s store.Store, _ Opener) {
	var seqs []uint64
	update(t, s, func(tx store.Tx) error {
		seqs = seqs[:0]
		for range 4 {
			for _, run := range []string{"audit", "auditx"} {
				e := &store.Event{RunID: run, At: t0, Type: "x"}
				if err := tx.EventAppend(e); err != nil {
					return err
				}
				if run == "audit" {
					seqs = append(seqs, e.Seq)
				}
			}
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.EventDeleteBefore("audit", seqs[2]) })
	view(t, s, func(tx store.Tx) error {
		left, err := tx.EventList(store.EventListParams{RunID: "audit"})
		other, err2 := tx.EventList(store.EventListParams{RunID: "auditx"})
		var got []uint64
		for _, e := range left {
			got = append(got, e.Seq)
		}
		return first(err, err2, same("audit events left", got, seqs[2:]), check(len(other) == 4, "auditx kept %d events, want 4", len(other)))
	})
}
