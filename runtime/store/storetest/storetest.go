// Package storetest is the suite every store.Store backend must pass.
//
// A backend's test calls Run with a function that opens a store for a
// test. Run drives every Tx method, the ordering and index guarantees the
// engine relies on (the ready queue, the child-run wait index, leases by
// deadline), the transaction semantics of Update (atomic per function,
// reads see the function's own writes, a failed function leaves nothing)
// and durability across Close and a new open. Backend-specific behaviour
// (crash safety with a killed process, locking, batching) is tested by the
// backend's own package.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Opener opens a store for t. It is called once per subtest for a fresh,
// empty store, and called again with the same t by the tests of
// durability after they closed the first store: that second call must
// return a store over the same data (for example, the same directory
// chosen per t). The opener registers any cleanup with t.Cleanup; closing
// a store the test already closed must be tolerated.
type Opener func(t *testing.T) store.Store

// Run runs the suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, open Opener)
	}{
		{"FlowVersions", testFlowVersions},
		{"FlowVersionOwner", testFlowVersionOwner},
		{"FlowNameList", testFlowNameList},
		{"Sources", testSources},
		{"Runs", testRuns},
		{"RunList", testRunList},
		{"RunListNewest", testRunListNewest},
		{"RunListNewestPaging", testRunListNewestPaging},
		{"RunCount", testRunCount},
		{"RunParked", testRunParked},
		{"OwnerSpend", testOwnerSpend},
		{"Continuations", testContinuations},
		{"Dedup", testDedup},
		{"OverlongIDs", testOverlongIDs},
		{"TaskGetPutDelete", testTaskBasics},
		{"TaskListReady", testTaskListReady},
		{"TaskListReadyByOwner", testTaskListReadyByOwner},
		{"OwnerIndexFollowsTasks", testOwnerIndexFollowsTasks},
		{"TaskClaim", testTaskClaim},
		{"TaskClaimConcurrent", testTaskClaimConcurrent},
		{"ServiceLease", testServiceLease},
		{"Schedules", testSchedules},
		{"OwnerEvents", testOwnerEvents},
		{"OwnerEventList", testOwnerEventList},
		{"OwnerEventsConcurrent", testOwnerEventsConcurrent},
		{"EventSlots", testEventSlots},
		{"EventSlotConcurrent", testEventSlotConcurrent},
		{"Triggers", testTriggers},
		{"TaskListByRun", testTaskListByRun},
		{"TaskByChild", testTaskByChild},
		{"TaskCount", testTaskCount},
		{"Leases", testLeases},
		{"Idem", testIdem},
		{"DeadLetters", testDeadLetters},
		{"Events", testEvents},
		{"Meta", testMeta},
		{"Cohorts", testCohorts},
		{"AgentTurns", testAgentTurns},
		{"Retention", testRetention},
		{"EventDeleteBefore", testEventDeleteBefore},
		{"ViewIsReadOnly", testViewReadOnly},
		{"RetainedTxFails", testRetainedTx},
		{"PanicReachesCaller", testPanicReachesCaller},
		{"ReadYourWrites", testReadYourWrites},
		{"FnErrorDiscardsItsWrites", testFnError},
		{"ConcurrentFnErrors", testConcurrentFnErrors},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ReadModifyWriteIsAtomic", testReadModifyWrite},
		{"Durability", testDurability},
		{"Closed", testClosed},
		{"ContextCancelled", testContextCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t), open)
		})
	}
}

// t0 is the suite's clock: UTC and without a monotonic reading, so records
// compare equal after a round trip through any encoding that keeps
// nanoseconds.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

var ctx = context.Background()

// update runs fn in an Update and fails the test on error. Assertions
// inside fn return errors (see check) rather than call t.Fatal: fn may run
// on a goroutine of the store's.
func update(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Update(ctx, fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.View(ctx, fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// read returns what fn reads in a View, failing the test on error.
func read[T any](t *testing.T, s store.Store, fn func(tx store.Tx) (T, error)) T {
	t.Helper()
	var out T
	view(t, s, func(tx store.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out
}

// check returns an error describing a failed expectation, or nil.
func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// same compares two values deeply and describes the difference as JSON.
func same(what string, got, want any) error {
	if reflect.DeepEqual(got, want) {
		return nil
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return fmt.Errorf("%s:\n got  %s\n want %s", what, g, w)
}

func isNotFound(what string, err error) error {
	return check(errors.Is(err, store.ErrNotFound), "%s: got error %v, want ErrNotFound", what, err)
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func newRun(id, owner string, phase store.Phase) *store.Run {
	return &store.Run{
		ID: id, Flow: "f", Version: "h1", Owner: owner, RequestID: "req-" + id,
		Input: json.RawMessage(`{"n":1}`), InputHash: "ih", Phase: phase, Attempt: 1,
		Depth: 0, ConfigVersion: 3, Budget: 100, CreatedAt: t0, UpdatedAt: t0,
	}
}

func newTask(id, run string, ready time.Time) *store.Task {
	return &store.Task{ID: id, RunID: run, Kind: store.TaskStep, Node: "n", Attempt: 1, ReadyAt: ready, CreatedAt: t0}
}

func taskIDs(ts []*store.Task) []string {
	ids := []string{}
	for _, tk := range ts {
		ids = append(ids, tk.ID)
	}
	return ids
}

func runIDs(rs []*store.Run) []string {
	ids := []string{}
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func testFlowVersions(t *testing.T, s store.Store, _ Opener) {
	v1 := &store.FlowVersion{Name: "triage", Hash: "h1", IR: json.RawMessage(`{"nodes":[1]}`), RegisteredAt: t0}
	v2 := &store.FlowVersion{Name: "triage", Hash: "h2", IR: json.RawMessage(`{"nodes":[2]}`), RegisteredAt: at(time.Second)}
	other := &store.FlowVersion{Name: "alpha", Hash: "h9", IR: json.RawMessage(`{}`), RegisteredAt: t0}

	view(t, s, func(tx store.Tx) error {
		_, err := tx.FlowVersionLatest("triage")
		list, lerr := tx.FlowVersionList()
		return first(isNotFound("latest of an unknown flow", err), lerr, check(len(list) == 0, "list of an empty store: %d", len(list)))
	})
	update(t, s, func(tx store.Tx) error { return tx.FlowVersionPut(v1) })
	if v1.Seq != 1 {
		t.Fatalf("first put assigned Seq %d, want 1", v1.Seq)
	}
	update(t, s, func(tx store.Tx) error { return tx.FlowVersionPut(v2) })
	update(t, s, func(tx store.Tx) error { return tx.FlowVersionPut(other) })
	if v2.Seq != 2 || other.Seq != 1 {
		t.Fatalf("Seq: triage h2 %d (want 2), alpha %d (want 1)", v2.Seq, other.Seq)
	}
	view(t, s, func(tx store.Tx) error {
		g1, err1 := tx.FlowVersionGet("triage", "h1")
		l, err2 := tx.FlowVersionLatest("triage")
		list, err3 := tx.FlowVersionList()
		_, err4 := tx.FlowVersionGet("triage", "nope")
		return first(err1, err2, err3,
			same("get h1", g1, v1),
			same("latest after two puts", l, v2),
			same("list: latest of every flow by name", list, []*store.FlowVersion{other, v2}),
			isNotFound("unknown hash", err4))
	})

	// Re-registering h1 makes it the latest again with a new Seq; a put
	// with an explicit lower Seq is stored but does not move the latest.
	again := *v1
	again.Seq = 0
	update(t, s, func(tx store.Tx) error { return tx.FlowVersionPut(&again) })
	old := &store.FlowVersion{Name: "triage", Hash: "h0", IR: json.RawMessage(`{}`), RegisteredAt: t0, Seq: 1}
	update(t, s, func(tx store.Tx) error { return tx.FlowVersionPut(old) })
	view(t, s, func(tx store.Tx) error {
		l, err := tx.FlowVersionLatest("triage")
		g, err2 := tx.FlowVersionGet("triage", "h0")
		return first(err, err2, check(again.Seq == 3, "re-put Seq %d, want 3", again.Seq),
			same("latest after re-put", l, &again), same("explicit-Seq version", g, old))
	})
	view(t, s, func(tx store.Tx) error {
		all, err1 := tx.FlowVersionHistory("triage", 0)
		two, err2 := tx.FlowVersionHistory("triage", 2)
		alpha, err3 := tx.FlowVersionHistory("alpha", 0)
		prefix, err4 := tx.FlowVersionHistory("tri", 0)
		none, err5 := tx.FlowVersionHistory("nothing", 0)
		return first(err1, err2, err3, err4, err5,
			same("a name's versions, newest first", all, []*store.FlowVersion{&again, v2, old}),
			same("the newest two", two, []*store.FlowVersion{&again, v2}),
			same("another name's", alpha, []*store.FlowVersion{other}),
			check(len(prefix) == 0, "a prefix of a name has %d versions, want 0", len(prefix)),
			check(len(none) == 0, "an unknown name has %d versions, want 0", len(none)))
	})
}

// testFlowNameList: the names of registered flows (once each, however
// many versions), in byte order, paged by an exclusive name.
func testFlowNameList(t *testing.T, s store.Store, _ Opener) {
	view(t, s, func(tx store.Tx) error {
		none, err := tx.FlowNameList(store.FlowNameListParams{})
		return first(err, check(len(none) == 0, "names of an empty store: %v", none))
	})
	names := []string{"b", "a", "a.b", "a-b", "B", "ab"}
	update(t, s, func(tx store.Tx) error {
		var errs []error
		for i, n := range names {
			errs = append(errs, tx.FlowVersionPut(&store.FlowVersion{Name: n, Hash: fmt.Sprint("h", i), IR: json.RawMessage(`{}`), RegisteredAt: t0}))
		}
		// A second version of a name lists the name once.
		errs = append(errs, tx.FlowVersionPut(&store.FlowVersion{Name: "a", Hash: "h9", IR: json.RawMessage(`{}`), RegisteredAt: t0}))
		return errors.Join(errs...)
	})
	view(t, s, func(tx store.Tx) error {
		all, err1 := tx.FlowNameList(store.FlowNameListParams{})
		page1, err2 := tx.FlowNameList(store.FlowNameListParams{Limit: 2})
		page2, err3 := tx.FlowNameList(store.FlowNameListParams{After: "a", Limit: 2})
		last, err4 := tx.FlowNameList(store.FlowNameListParams{After: "ab", Limit: 10})
		between, err5 := tx.FlowNameList(store.FlowNameListParams{After: "a.a"})
		past, err6 := tx.FlowNameList(store.FlowNameListParams{After: "zzz"})
		return first(err1, err2, err3, err4, err5, err6,
			same("every name in byte order", all, []string{"B", "a", "a-b", "a.b", "ab", "b"}),
			same("the first page", page1, []string{"B", "a"}),
			same("the page after a", page2, []string{"a-b", "a.b"}),
			same("the last page", last, []string{"b"}),
			same("after a name never registered", between, []string{"a.b", "ab", "b"}),
			check(len(past) == 0, "after the last name: %v", past))
	})
}

// testFlowVersionOwner: the owner a version was put with is read back by
// every read of it, and a version put without one reads back without one
// (a version of an earlier release).
func testFlowVersionOwner(t *testing.T, s store.Store, _ Opener) {
	mine := &store.FlowVersion{Name: "payroll", Hash: "p1", IR: json.RawMessage(`{}`), RegisteredAt: t0, Owner: "root"}
	next := &store.FlowVersion{Name: "payroll", Hash: "p2", IR: json.RawMessage(`{}`), RegisteredAt: at(time.Second), Owner: "root"}
	legacy := &store.FlowVersion{Name: "legacy", Hash: "l1", IR: json.RawMessage(`{}`), RegisteredAt: t0}
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.FlowVersionPut(mine), tx.FlowVersionPut(next), tx.FlowVersionPut(legacy))
	})
	view(t, s, func(tx store.Tx) error {
		g, err1 := tx.FlowVersionGet("payroll", "p1")
		l, err2 := tx.FlowVersionLatest("payroll")
		list, err3 := tx.FlowVersionList()
		lg, err4 := tx.FlowVersionLatest("legacy")
		return first(err1, err2, err3, err4,
			same("get keeps the owner", g.Owner, "root"),
			same("latest keeps the owner", l, next),
			same("list keeps the owners", []string{list[0].Owner, list[1].Owner}, []string{"", "root"}),
			same("a version put without an owner", lg.Owner, ""))
	})
}

func testSources(t *testing.T, s store.Store, _ Opener) {
	src := &store.Source{Hash: "sh", Files: []store.SourceFile{{Path: "a.star", Src: []byte("x = 1\n")}, {Path: "b.star", Src: []byte("y")}}}
	update(t, s, func(tx store.Tx) error { return tx.SourcePut(src) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.SourceGet("sh")
		_, err2 := tx.SourceGet("other")
		return first(err, same("source", got, src), isNotFound("unknown source", err2))
	})
}

func testRuns(t *testing.T, s store.Store, _ Opener) {
	r := newRun("r1", "alice", store.PhaseQueued)
	r.Ancestors = []string{"root", "mid"}
	r.ParentRunID, r.ParentNode, r.Depth = "r0", "call", 2
	r.ForkedFrom, r.StartedBy = &store.ForkRef{RunID: "r-src", Node: "b", Visit: 2}, "fork:r-src:b@2" // lineage round-trips
	r.Error = &store.RunError{Code: "E_X", Message: "m"}
	r.FinishedAt = at(time.Minute)
	update(t, s, func(tx store.Tx) error { return tx.RunInsert(r) })

	err := s.Update(ctx, func(tx store.Tx) error { return tx.RunInsert(newRun("r1", "bob", store.PhaseQueued)) })
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second RunInsert of r1: %v, want ErrExists", err)
	}
	err = s.Update(ctx, func(tx store.Tx) error { return tx.RunUpdate(newRun("nope", "bob", store.PhaseQueued)) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RunUpdate of a missing run: %v, want ErrNotFound", err)
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.RunGet("r1")
		return first(err, same("inserted run", got, r))
	})

	r2 := *r
	r2.Phase, r2.Attempt, r2.Spent, r2.Output = store.PhaseCompleted, 2, 7, json.RawMessage(`"done"`)
	r2.Budget, r2.Escrow, r2.Reserve = 100, 30, 40 // the budget escrow round-trips
	update(t, s, func(tx store.Tx) error { return tx.RunUpdate(&r2) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.RunGet("r1")
		return first(err, same("updated run", got, &r2))
	})

	update(t, s, func(tx store.Tx) error { return tx.RunDelete("r1") })
	view(t, s, func(tx store.Tx) error {
		_, err := tx.RunGet("r1")
		list, lerr := tx.RunList(store.RunListParams{})
		return first(isNotFound("deleted run", err), lerr, check(len(list) == 0, "deleted run still listed: %v", runIDs(list)))
	})
	err = s.Update(ctx, func(tx store.Tx) error { return tx.RunDelete("r1") })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RunDelete of a missing run: %v, want ErrNotFound", err)
	}
}

// testRunListNewest checks the newest-first order: by creation time, not
// id (ids are random), ties in id order; filters; and an update or delete
// keeping the order's index true.
func testRunListNewest(t *testing.T, s store.Store, _ Opener) {
	// n00..n09: created at t0 + (i*7 mod 10) minutes, so id order is not
	// time order; n10 is created at n03's instant (a tie).
	at := func(i int) time.Time { return t0.Add(time.Duration(i*7%10) * time.Minute) }
	update(t, s, func(tx store.Tx) error {
		for i := range 11 {
			r := newRun(fmt.Sprintf("n%02d", i), []string{"alice", "bob"}[i%2], store.PhaseQueued)
			r.CreatedAt = at(i)
			if i == 10 {
				r.CreatedAt = at(3)
			}
			if i%3 == 0 {
				r.Flow = "g"
			}
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		// A run's later writes keep its one place in the order.
		r, err := tx.RunGet("n04")
		if err != nil {
			return err
		}
		r.Phase = store.PhaseRunning
		r.UpdatedAt = t0.Add(time.Hour)
		if err := tx.RunUpdate(r); err != nil {
			return err
		}
		return tx.RunDelete("n06")
	})
	// Minutes: n00 0, n01 7, n02 4, n03 1, n04 8, n05 5, n06 2 (deleted),
	// n07 9, n08 6, n09 3, n10 1 (n03's).
	cur := func(id string, min int) *store.RunCursor {
		return &store.RunCursor{CreatedAt: t0.Add(time.Duration(min) * time.Minute), ID: id}
	}
	newest := store.OrderNewest
	cases := []struct {
		name string
		p    store.RunListParams
		want []string
	}{
		{"alice", store.RunListParams{Owner: "alice", Order: newest}, []string{"n04", "n08", "n02", "n10", "n00"}},
		{"bob", store.RunListParams{Owner: "bob", Order: newest}, []string{"n07", "n01", "n05", "n09", "n03"}},
		{"everyone", store.RunListParams{Order: newest}, []string{"n07", "n04", "n01", "n08", "n05", "n02", "n09", "n03", "n10", "n00"}},
		{"limit", store.RunListParams{Owner: "alice", Order: newest, Limit: 2}, []string{"n04", "n08"}},
		{"before", store.RunListParams{Owner: "alice", Order: newest, Before: cur("n08", 6)}, []string{"n02", "n10", "n00"}},
		{"before a tie", store.RunListParams{Order: newest, Before: cur("n03", 1)}, []string{"n10", "n00"}},
		{"before a run that is gone", store.RunListParams{Owner: "alice", Order: newest, Before: cur("n06", 2)}, []string{"n10", "n00"}},
		{"flow", store.RunListParams{Owner: "bob", Order: newest, Flow: "g"}, []string{"n09", "n03"}},
		{"flow in id order", store.RunListParams{Flow: "g"}, []string{"n00", "n03", "n09"}},
		{"phase", store.RunListParams{Owner: "alice", Order: newest, Phase: store.PhaseRunning}, []string{"n04"}},
		{"unknown owner", store.RunListParams{Owner: "carol", Order: newest}, []string{}},
	}
	for _, c := range cases {
		view(t, s, func(tx store.Tx) error {
			got, err := tx.RunList(c.p)
			return first(err, same(c.name, runIDs(got), c.want))
		})
	}
}

// testRunListNewestPaging pages through a few thousand runs newest first,
// a page at a time from the last run of the page before, and checks every
// run comes once, in order.
func testRunListNewestPaging(t *testing.T, s store.Store, _ Opener) {
	const n, page = 2000, 137
	want := make([]string, n)
	for b := 0; b < n; b += 100 { // small transactions: every backend takes them
		update(t, s, func(tx store.Tx) error {
			for i := b; i < b+100; i++ {
				// Ids in an order unrelated to time; every fifth shares
				// the instant of the one before.
				id := fmt.Sprintf("p%04d", (i*7919)%n)
				r := newRun(id, "alice", store.PhaseQueued)
				r.CreatedAt = t0.Add(time.Duration(i-i%5/4) * time.Second)
				if err := tx.RunInsert(r); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var all []*store.Run
	view(t, s, func(tx store.Tx) error {
		var err error
		all, err = tx.RunList(store.RunListParams{Owner: "alice"})
		return err
	})
	slices.SortFunc(all, store.CompareNewest)
	for i, r := range all {
		want[i] = r.ID
	}
	var got []string
	var before *store.RunCursor
	for pages := 0; ; pages++ {
		if pages > n/page+1 {
			t.Fatalf("paging did not end after %d pages", pages)
		}
		var rs []*store.Run
		view(t, s, func(tx store.Tx) error {
			var err error
			rs, err = tx.RunList(store.RunListParams{Owner: "alice", Order: store.OrderNewest, Before: before, Limit: page})
			return err
		})
		got = append(got, runIDs(rs)...)
		if len(rs) < page {
			break
		}
		last := rs[len(rs)-1]
		before = &store.RunCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if err := same("every page", got, want); err != nil {
		t.Fatal(err)
	}
}

func testRunList(t *testing.T, s store.Store, _ Opener) {
	// r00..r11: owners alternate, phases cycle, every third is a child of p.
	phases := []store.Phase{store.PhaseQueued, store.PhaseRunning, store.PhaseCompleted}
	var all []*store.Run
	update(t, s, func(tx store.Tx) error {
		// Inserted out of id order: listing must sort.
		for _, i := range []int{7, 3, 11, 0, 5, 9, 1, 10, 2, 8, 4, 6} {
			r := newRun(fmt.Sprintf("r%02d", i), []string{"alice", "bob"}[i%2], phases[i%3])
			if i%3 == 0 {
				r.ParentRunID = "p"
			}
			if err := tx.RunInsert(r); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		var err error
		all, err = tx.RunList(store.RunListParams{})
		return err
	})
	want := func(keep func(i int) bool) []string {
		ids := []string{}
		for i := range 12 {
			if keep(i) {
				ids = append(ids, fmt.Sprintf("r%02d", i))
			}
		}
		return ids
	}
	cases := []struct {
		name string
		p    store.RunListParams
		want []string
	}{
		{"all", store.RunListParams{}, want(func(int) bool { return true })},
		{"owner", store.RunListParams{Owner: "bob"}, want(func(i int) bool { return i%2 == 1 })},
		{"phase", store.RunListParams{Phase: store.PhaseRunning}, want(func(i int) bool { return i%3 == 1 })},
		{"parent", store.RunListParams{ParentRunID: "p"}, want(func(i int) bool { return i%3 == 0 })},
		{"owner and phase", store.RunListParams{Owner: "alice", Phase: store.PhaseQueued}, want(func(i int) bool { return i%2 == 0 && i%3 == 0 })},
		{"owner and parent", store.RunListParams{Owner: "bob", ParentRunID: "p"}, want(func(i int) bool { return i%2 == 1 && i%3 == 0 })},
		{"limit", store.RunListParams{Limit: 3}, []string{"r00", "r01", "r02"}},
		{"after", store.RunListParams{After: "r09"}, []string{"r10", "r11"}},
		{"after an id that does not exist", store.RunListParams{After: "r05x"}, want(func(i int) bool { return i > 5 })},
		{"owner after limit", store.RunListParams{Owner: "alice", After: "r02", Limit: 2}, []string{"r04", "r06"}},
		{"unknown owner", store.RunListParams{Owner: "carol"}, []string{}},
	}
	for _, c := range cases {
		view(t, s, func(tx store.Tx) error {
			got, err := tx.RunList(c.p)
			return first(err, same(c.name, runIDs(got), c.want))
		})
	}
	if err := same("full records", all[3], func() *store.Run {
		r := newRun("r03", "bob", store.PhaseQueued)
		r.ParentRunID = "p"
		return r
	}()); err != nil {
		t.Fatal(err)
	}

	// Paging through every filter visits each matching run exactly once.
	for _, p := range []store.RunListParams{{}, {Owner: "alice"}, {Phase: store.PhaseCompleted}, {ParentRunID: "p"}} {
		var full, paged []string
		view(t, s, func(tx store.Tx) error {
			rs, err := tx.RunList(p)
			full = runIDs(rs)
			for after := ""; err == nil; {
				pp := p
				pp.After, pp.Limit = after, 2
				rs, err = tx.RunList(pp)
				if len(rs) == 0 {
					break
				}
				paged = append(paged, runIDs(rs)...)
				after = rs[len(rs)-1].ID
			}
			return err
		})
		if !slices.Equal(full, paged) {
			t.Fatalf("paging %+v by 2: %v, want %v", p, paged, full)
		}
	}

	// Changing a run's phase moves it between phase filters.
	update(t, s, func(tx store.Tx) error {
		return ChangeRun(tx, "r01", func(r *store.Run) { r.Phase = store.PhaseFailed })
	})
	view(t, s, func(tx store.Tx) error {
		running, err := tx.RunList(store.RunListParams{Phase: store.PhaseRunning})
		failed, err2 := tx.RunList(store.RunListParams{Phase: store.PhaseFailed})
		return first(err, err2, same("running after r01 failed", runIDs(running), []string{"r04", "r07", "r10"}),
			same("failed", runIDs(failed), []string{"r01"}))
	})
}

func testContinuations(t *testing.T, s store.Store, _ Opener) {
	data := []byte("\x00\x01continuation")
	update(t, s, func(tx store.Tx) error { return tx.ContinuationPut("r1", data) })
	data[0] = 'X' // the store must have kept its own copy
	view(t, s, func(tx store.Tx) error {
		got, err := tx.ContinuationGet("r1")
		if err != nil {
			return err
		}
		if err := same("continuation", got, []byte("\x00\x01continuation")); err != nil {
			return err
		}
		got[1] = 'Y' // nor may a reader change it
		again, err := tx.ContinuationGet("r1")
		_, err2 := tx.ContinuationGet("r2")
		return first(err, same("continuation read twice", again, []byte("\x00\x01continuation")), isNotFound("unknown run", err2))
	})
	update(t, s, func(tx store.Tx) error { return tx.ContinuationPut("r1", []byte("v2")) })
	update(t, s, func(tx store.Tx) error {
		got, err := tx.ContinuationGet("r1")
		return first(err, same("replaced", got, []byte("v2")), tx.ContinuationDelete("r1"))
	})
	checkDeleted(t, s, "continuation",
		func(tx store.Tx) error { _, err := tx.ContinuationGet("r1"); return err },
		func(tx store.Tx) error { return tx.ContinuationDelete("r1") })
}

// checkDeleted checks that get finds no what after it was deleted, and
// that del, deleting it again, fails with ErrNotFound.
func checkDeleted(t *testing.T, s store.Store, what string, get, del func(tx store.Tx) error) {
	t.Helper()
	view(t, s, func(tx store.Tx) error { return isNotFound("deleted "+what, get(tx)) })
	if err := s.Update(ctx, del); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting a missing %s: %v, want ErrNotFound", what, err)
	}
}

func testDedup(t *testing.T, s store.Store, _ Opener) {
	d := &store.Dedup{Owner: "alice", RequestID: "q1", RunID: "r1", Flow: "hello", InputHash: "ih", CreatedAt: t0}
	other := &store.Dedup{Owner: "bob", RequestID: "q1", RunID: "r2", Flow: "bye", InputHash: "ih2", CreatedAt: t0}
	// A record as written before records kept their flow.
	old := &store.Dedup{Owner: "alice", RequestID: "q0", RunID: "r0", InputHash: "ih0", CreatedAt: t0}
	update(t, s, func(tx store.Tx) error { return first(tx.DedupPut(d), tx.DedupPut(other), tx.DedupPut(old)) })
	view(t, s, func(tx store.Tx) error {
		g, err := tx.DedupGet("alice", "q1")
		g2, err2 := tx.DedupGet("bob", "q1")
		_, err3 := tx.DedupGet("alice", "q2")
		g0, err4 := tx.DedupGet("alice", "q0")
		return first(err, err2, err4, same("alice q1", g, d), same("bob q1 is its own key", g2, other), same("a record without a flow", g0, old), isNotFound("unknown request", err3))
	})
	update(t, s, func(tx store.Tx) error { return tx.DedupDelete("alice", "q1") })
	view(t, s, func(tx store.Tx) error {
		_, err := tx.DedupGet("alice", "q1")
		_, err2 := tx.DedupGet("bob", "q1")
		return first(isNotFound("deleted", err), err2)
	})
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.DedupDelete("alice", "q1") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting a missing dedup key: %v, want ErrNotFound", err)
	}
}

func testTaskBasics(t *testing.T, s store.Store, _ Opener) {
	tk := newTask("t1", "r1", t0)
	tk.Kind, tk.Item, tk.Visit, tk.WaitKind = store.TaskItem, 4, 2, "timer"
	tk.Errors = []store.AttemptError{{Attempt: 1, Code: "E", Message: "m", At: t0}}
	update(t, s, func(tx store.Tx) error { return tx.TaskPut(tk) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.TaskGet("t1")
		_, err2 := tx.TaskGet("t2")
		return first(err, same("task", got, tk), isNotFound("unknown task", err2))
	})
	del := func(tx store.Tx) error { return tx.TaskDelete("t1") }
	update(t, s, del)
	checkDeleted(t, s, "task", func(tx store.Tx) error { _, err := tx.TaskGet("t1"); return err }, del)
}

func testTaskListReady(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error {
		return first(
			tx.TaskPut(newTask("c", "r", at(3*time.Second))),
			tx.TaskPut(newTask("a", "r", at(1*time.Second))),
			tx.TaskPut(newTask("b2", "r", at(2*time.Second))),
			tx.TaskPut(newTask("b1", "r", at(2*time.Second))), // same ready time: by id
			tx.TaskPut(newTask("zero", "r", time.Time{})),     // ready since forever
			tx.TaskPut(newTask("parked", "r", at(time.Hour))), // waits
			func() error {
				l := newTask("leased", "r", t0)
				l.Leased = true
				return tx.TaskPut(l)
			}(),
		)
	})
	ready := func(now time.Time, limit int) []string {
		return taskIDs(read(t, s, func(tx store.Tx) ([]*store.Task, error) { return tx.TaskListReady(now, limit) }))
	}
	for _, c := range []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"before everything", at(-time.Hour), 0, []string{"zero"}},
		{"ready time is inclusive", at(2 * time.Second), 0, []string{"zero", "a", "b1", "b2"}},
		{"one nanosecond before", at(2*time.Second - 1), 0, []string{"zero", "a"}},
		{"all but parked and leased", at(time.Minute), 0, []string{"zero", "a", "b1", "b2", "c"}},
		{"limit", at(time.Minute), 2, []string{"zero", "a"}},
		{"parked task at its time", at(time.Hour), 0, []string{"zero", "a", "b1", "b2", "c", "parked"}},
	} {
		if got := ready(c.now, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// Waking the parked task moves it to now; leasing a ready task removes
	// it from the queue; releasing the lease puts it back. No stale index
	// entry may list a task twice or at its old time.
	update(t, s, func(tx store.Tx) error {
		return first(ChangeTask(tx, "parked", func(tk *store.Task) { tk.ReadyAt = at(1500 * time.Millisecond) }),
			ChangeTask(tx, "a", func(tk *store.Task) { tk.Leased = true }),
			ChangeTask(tx, "leased", func(tk *store.Task) { tk.Leased, tk.ReadyAt = false, at(2500*time.Millisecond) }))
	})
	if got, want := ready(at(time.Hour), 0), []string{"zero", "parked", "b1", "b2", "leased", "c"}; !slices.Equal(got, want) {
		t.Fatalf("after wake, lease and release: %v, want %v", got, want)
	}
	update(t, s, func(tx store.Tx) error { return tx.TaskDelete("b1") })
	if got, want := ready(at(time.Hour), 0), []string{"zero", "parked", "b2", "leased", "c"}; !slices.Equal(got, want) {
		t.Fatalf("after delete: %v, want %v", got, want)
	}
}

func testTaskListByRun(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error {
		l := newTask("t3", "r1", t0)
		l.Leased = true
		return first(tx.TaskPut(newTask("t2", "r1", at(time.Hour))), tx.TaskPut(l),
			tx.TaskPut(newTask("t1", "r1", t0)), tx.TaskPut(newTask("u1", "r2", t0)),
			tx.TaskPut(newTask("v1", "r10", t0)))
	})
	byRun := func(run string) []string {
		var ids []string
		view(t, s, func(tx store.Tx) error {
			ts, err := tx.TaskListByRun(run)
			ids = taskIDs(ts)
			return err
		})
		return ids
	}
	if got, want := byRun("r1"), []string{"t1", "t2", "t3"}; !slices.Equal(got, want) {
		t.Fatalf("tasks of r1 (parked and leased included): %v, want %v", got, want)
	}
	// A task moved to another run leaves the first run's list.
	update(t, s, func(tx store.Tx) error {
		return ChangeTask(tx, "t2", func(tk *store.Task) { tk.RunID = "r2" })
	})
	if got, want := byRun("r1"), []string{"t1", "t3"}; !slices.Equal(got, want) {
		t.Fatalf("r1 after moving t2: %v, want %v", got, want)
	}
	if got, want := byRun("r2"), []string{"t2", "u1"}; !slices.Equal(got, want) {
		t.Fatalf("r2: %v, want %v", got, want)
	}
	if got := byRun("nope"); len(got) != 0 {
		t.Fatalf("unknown run: %v", got)
	}
}

func testTaskByChild(t *testing.T, s store.Store, _ Opener) {
	byChild := func(child string) (string, error) {
		var id string
		err := s.View(ctx, func(tx store.Tx) error {
			tk, err := tx.TaskByChild(child)
			if err == nil {
				id = tk.ID
			}
			return err
		})
		return id, err
	}
	w := newTask("w", "parent", at(time.Hour))
	w.WaitChild, w.WaitKind = "c1", "child"
	update(t, s, func(tx store.Tx) error { return first(tx.TaskPut(w), tx.TaskPut(newTask("x", "parent", t0))) })
	if id, err := byChild("c1"); err != nil || id != "w" {
		t.Fatalf("TaskByChild(c1) = %q, %v; want w", id, err)
	}
	if _, err := byChild("c10"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TaskByChild of a child nobody waits on: %v, want ErrNotFound", err)
	}

	// Replacing WaitChild moves the index entry.
	w.WaitChild = "c2"
	update(t, s, func(tx store.Tx) error { return tx.TaskPut(w) })
	if _, err := byChild("c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TaskByChild(c1) after the wait moved to c2: %v, want ErrNotFound", err)
	}
	if id, err := byChild("c2"); err != nil || id != "w" {
		t.Fatalf("TaskByChild(c2) = %q, %v; want w", id, err)
	}

	// Waking: the wait is cleared.
	w.WaitChild, w.WaitKind, w.ReadyAt = "", "", t0
	update(t, s, func(tx store.Tx) error { return tx.TaskPut(w) })
	if _, err := byChild("c2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TaskByChild(c2) after the wait was cleared: %v, want ErrNotFound", err)
	}

	// Deleting the waiting task removes its entry.
	w.WaitChild = "c3"
	update(t, s, func(tx store.Tx) error { return tx.TaskPut(w) })
	if id, err := byChild("c3"); err != nil || id != "w" {
		t.Fatalf("TaskByChild(c3) = %q, %v; want w", id, err)
	}
	update(t, s, func(tx store.Tx) error { return tx.TaskDelete("w") })
	if _, err := byChild("c3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TaskByChild(c3) after TaskDelete: %v, want ErrNotFound", err)
	}
}

func testTaskCount(t *testing.T, s store.Store, _ Opener) {
	count := func() [2]int {
		var q, l int
		view(t, s, func(tx store.Tx) error {
			var err error
			q, l, err = tx.TaskCount()
			return err
		})
		return [2]int{q, l}
	}
	if got := count(); got != [2]int{0, 0} {
		t.Fatalf("empty store: %v", got)
	}
	update(t, s, func(tx store.Tx) error {
		l := newTask("l", "r", t0)
		l.Leased = true
		return first(tx.TaskPut(newTask("a", "r", t0)), tx.TaskPut(newTask("p", "r", at(time.Hour))), tx.TaskPut(l))
	})
	if got := count(); got != [2]int{2, 1} {
		t.Fatalf("queued (parked included) and leased: %v, want [2 1]", got)
	}
	update(t, s, func(tx store.Tx) error {
		a := newTask("a", "r", t0)
		a.Leased = true
		return first(tx.TaskPut(a), tx.TaskPut(newTask("p", "r", t0))) // replace, not add
	})
	if got := count(); got != [2]int{1, 2} {
		t.Fatalf("after leasing a and replacing p: %v, want [1 2]", got)
	}
	update(t, s, func(tx store.Tx) error { return first(tx.TaskDelete("a"), tx.TaskDelete("p")) })
	if got := count(); got != [2]int{0, 1} {
		t.Fatalf("after deletes: %v, want [0 1]", got)
	}
}

func testLeases(t *testing.T, s store.Store, _ Opener) {
	mk := func(task string, deadline time.Time) *store.Lease {
		return &store.Lease{TaskID: task, RunID: "r", Slot: 2, BudgetSlice: 5, Deadline: deadline, Attempt: 1, Holder: "h"}
	}
	update(t, s, func(tx store.Tx) error {
		return first(tx.LeasePut(mk("t3", at(3*time.Second))), tx.LeasePut(mk("t1", at(1*time.Second))),
			tx.LeasePut(mk("t2", at(2*time.Second))), tx.LeasePut(mk("t0", at(2*time.Second))))
	})
	expired := func(now time.Time, limit int) []string {
		ids := []string{}
		for _, l := range read(t, s, func(tx store.Tx) ([]*store.Lease, error) { return tx.LeaseListExpired(now, limit) }) {
			ids = append(ids, l.TaskID)
		}
		return ids
	}
	for _, c := range []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"none yet", t0, 0, []string{}},
		{"deadline is exclusive", at(2 * time.Second), 0, []string{"t1"}},
		{"by deadline then task", at(2*time.Second + 1), 0, []string{"t1", "t0", "t2"}},
		{"limit", at(time.Hour), 2, []string{"t1", "t0"}},
	} {
		if got := expired(c.now, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Renewing moves the deadline: t1 is no longer expired at 2s.
	update(t, s, func(tx store.Tx) error { return tx.LeasePut(mk("t1", at(time.Minute))) })
	if got, want := expired(at(2*time.Second+1), 0), []string{"t0", "t2"}; !slices.Equal(got, want) {
		t.Fatalf("after renewing t1: %v, want %v", got, want)
	}
	view(t, s, func(tx store.Tx) error {
		l, err := tx.LeaseGet("t1")
		all, err2 := tx.LeaseList()
		_, err3 := tx.LeaseGet("nope")
		ids := []string{}
		for _, l := range all {
			ids = append(ids, l.TaskID)
		}
		return first(err, err2, same("renewed lease", l, mk("t1", at(time.Minute))),
			same("LeaseList", ids, []string{"t0", "t1", "t2", "t3"}), isNotFound("unknown lease", err3))
	})
	update(t, s, func(tx store.Tx) error { return tx.LeaseDelete("t0") })
	if got, want := expired(at(time.Hour), 0), []string{"t2", "t3", "t1"}; !slices.Equal(got, want) {
		t.Fatalf("after deleting t0: %v, want %v", got, want)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.LeaseDelete("t0") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting a missing lease: %v, want ErrNotFound", err)
	}
}

func testIdem(t *testing.T, s store.Store, _ Opener) {
	r := &store.Idem{Key: "k1", RunID: "r", Node: "n", Tool: "mail.send", State: store.IdemStarted, StartedAt: t0}
	update(t, s, func(tx store.Tx) error { return tx.IdemPut(r) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.IdemGet("k1")
		_, err2 := tx.IdemGet("k2")
		return first(err, same("started", got, r), isNotFound("unknown key", err2))
	})
	done := *r
	done.State, done.Result, done.DoneAt = store.IdemDone, json.RawMessage(`{"ok":true}`), at(time.Second)
	update(t, s, func(tx store.Tx) error { return tx.IdemPut(&done) })
	view(t, s, func(tx store.Tx) error {
		got, err := tx.IdemGet("k1")
		return first(err, same("done", got, &done))
	})
}

func testDeadLetters(t *testing.T, s store.Store, _ Opener) {
	mk := func(task, owner string, when time.Time) *store.DeadLetter {
		return &store.DeadLetter{TaskID: task, RunID: "r-" + task, Owner: owner, Flow: "f", Node: "n", Tool: "tool",
			Errors: []store.AttemptError{{Attempt: 1, Code: "E1", Message: "a", At: t0}, {Attempt: 2, Code: "E2", Message: "b", At: when}}, At: when}
	}
	d1, d2, d3 := mk("t1", "alice", at(2*time.Second)), mk("t2", "bob", at(1*time.Second)), mk("t3", "alice", at(3*time.Second))
	update(t, s, func(tx store.Tx) error {
		return first(tx.DeadLetterPut(d1), tx.DeadLetterPut(d2), tx.DeadLetterPut(d3))
	})
	list := func(p store.DeadLetterListParams) []*store.DeadLetter {
		return read(t, s, func(tx store.Tx) ([]*store.DeadLetter, error) { return tx.DeadLetterList(p) })
	}
	if err := first(
		same("all, oldest first", list(store.DeadLetterListParams{}), []*store.DeadLetter{d2, d1, d3}),
		same("owner", list(store.DeadLetterListParams{Owner: "alice"}), []*store.DeadLetter{d1, d3}),
		same("limit", list(store.DeadLetterListParams{Limit: 1}), []*store.DeadLetter{d2}),
		same("owner and limit", list(store.DeadLetterListParams{Owner: "alice", Limit: 1}), []*store.DeadLetter{d1}),
		check(len(list(store.DeadLetterListParams{Owner: "carol"})) == 0, "unknown owner listed dead letters"),
	); err != nil {
		t.Fatal(err)
	}
	// A task dead-lettered again replaces its entry (and its owner's).
	d2b := mk("t2", "alice", at(4*time.Second))
	update(t, s, func(tx store.Tx) error { return tx.DeadLetterPut(d2b) })
	if err := first(
		same("all after replacing t2", list(store.DeadLetterListParams{}), []*store.DeadLetter{d1, d3, d2b}),
		check(len(list(store.DeadLetterListParams{Owner: "bob"})) == 0, "bob still lists t2"),
		same("alice after replacing t2", list(store.DeadLetterListParams{Owner: "alice"}), []*store.DeadLetter{d1, d3, d2b}),
	); err != nil {
		t.Fatal(err)
	}
	testDeadLetterFilters(t, s, list)
	testDeadLetterGetDelete(t, s, list)
}

// testDeadLetterFilters: flow, tool and since each narrow the list, with
// and without an owner, and a limit counts only what matched.
func testDeadLetterFilters(t *testing.T, s store.Store, list func(store.DeadLetterListParams) []*store.DeadLetter) {
	other := &store.DeadLetter{TaskID: "t4", RunID: "r-t4", Owner: "alice", Flow: "g", Node: "n", Tool: "other",
		Errors: []store.AttemptError{{Attempt: 1, Code: "E1", Message: "a", At: t0}}, At: at(5 * time.Second)}
	update(t, s, func(tx store.Tx) error { return tx.DeadLetterPut(other) })
	ids := func(ds []*store.DeadLetter) string {
		var out []string
		for _, d := range ds {
			out = append(out, d.TaskID)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		name string
		p    store.DeadLetterListParams
		want string
	}{
		{"flow", store.DeadLetterListParams{Flow: "g"}, "t4"},
		{"owner and flow", store.DeadLetterListParams{Owner: "alice", Flow: "f"}, "t1,t3,t2"},
		{"tool", store.DeadLetterListParams{Tool: "tool"}, "t1,t3,t2"},
		{"owner, tool and limit", store.DeadLetterListParams{Owner: "alice", Tool: "other", Limit: 1}, "t4"},
		{"flow and limit", store.DeadLetterListParams{Flow: "f", Limit: 2}, "t1,t3"},
		{"since", store.DeadLetterListParams{Since: at(3 * time.Second)}, "t3,t2,t4"},
		{"owner and since", store.DeadLetterListParams{Owner: "alice", Since: at(4 * time.Second)}, "t2,t4"},
		{"since, flow and tool", store.DeadLetterListParams{Since: at(4 * time.Second), Flow: "f", Tool: "tool"}, "t2"},
		{"no match", store.DeadLetterListParams{Flow: "f", Tool: "other"}, ""},
		{"unknown owner's flow", store.DeadLetterListParams{Owner: "carol", Flow: "f"}, ""},
	} {
		if got := ids(list(c.p)); got != c.want {
			t.Errorf("%s: listed [%s], want [%s]", c.name, got, c.want)
		}
	}
}

// testDeadLetterGetDelete: a dead letter is read by its task id, and once
// deleted it is gone from the reads and from every order it was listed in.
func testDeadLetterGetDelete(t *testing.T, s store.Store, list func(store.DeadLetterListParams) []*store.DeadLetter) {
	var d3 *store.DeadLetter
	view(t, s, func(tx store.Tx) error {
		var err error
		d3, err = tx.DeadLetterGet("t3")
		_, err2 := tx.DeadLetterGet("nope")
		return first(err, check(d3.RunID == "r-t3" && d3.Owner == "alice" && len(d3.Errors) == 2, "got %+v", d3), isNotFound("unknown task", err2))
	})
	update(t, s, func(tx store.Tx) error {
		if err := tx.DeadLetterDelete("t3"); err != nil {
			return err
		}
		_, err := tx.DeadLetterGet("t3")
		return first(isNotFound("deleted in the same transaction", err), tx.DeadLetterDelete("t3"), tx.DeadLetterDelete("nope"))
	})
	view(t, s, func(tx store.Tx) error {
		_, err := tx.DeadLetterGet("t3")
		return isNotFound("after delete", err)
	})
	for _, p := range []store.DeadLetterListParams{{}, {Owner: "alice"}, {Flow: "f"}, {Owner: "alice", Tool: "tool"}} {
		for _, d := range list(p) {
			if d.TaskID == "t3" {
				t.Errorf("list %+v still holds the deleted t3", p)
			}
		}
	}
	// Dead-lettered again, it is listed again.
	update(t, s, func(tx store.Tx) error { return tx.DeadLetterPut(d3) })
	if got := list(store.DeadLetterListParams{Owner: "alice", Flow: "f"}); len(got) != 3 {
		t.Errorf("after putting t3 back alice lists %d dead letters of f, want 3", len(got))
	}
	if err := s.View(ctx, func(tx store.Tx) error { return tx.DeadLetterDelete("t1") }); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("DeadLetterDelete in View: %v, want ErrReadOnly", err)
	}
}

func testEvents(t *testing.T, s store.Store, _ Opener) {
	var appended []*store.Event
	update(t, s, func(tx store.Tx) error {
		for i := range 6 {
			run := []string{"ra", "rb"}[i%2]
			e := &store.Event{RunID: run, At: at(time.Duration(i)), Type: "queued", Attempt: 1, Node: "n", Detail: map[string]any{"i": fmt.Sprint(i)}}
			if err := tx.EventAppend(e); err != nil {
				return err
			}
			appended = append(appended, e)
		}
		return nil
	})
	var last uint64
	for _, e := range appended {
		if e.Seq <= last {
			t.Fatalf("Seq not strictly increasing across the store: %d after %d", e.Seq, last)
		}
		last = e.Seq
	}
	// A second transaction continues the sequence.
	e7 := &store.Event{RunID: "ra", At: at(time.Minute), Type: "completed"}
	update(t, s, func(tx store.Tx) error { return tx.EventAppend(e7) })
	if e7.Seq <= last {
		t.Fatalf("Seq %d of a later transaction not above %d", e7.Seq, last)
	}
	ra := []*store.Event{appended[0], appended[2], appended[4], e7}
	list := func(p store.EventListParams) []*store.Event {
		return read(t, s, func(tx store.Tx) ([]*store.Event, error) { return tx.EventList(p) })
	}
	if err := first(
		same("ra in order", list(store.EventListParams{RunID: "ra"}), ra),
		same("after the second", list(store.EventListParams{RunID: "ra", AfterSeq: ra[1].Seq}), ra[2:]),
		same("after a seq of another run", list(store.EventListParams{RunID: "ra", AfterSeq: appended[1].Seq}), ra[1:]),
		same("limit", list(store.EventListParams{RunID: "ra", Limit: 2}), ra[:2]),
		same("after and limit", list(store.EventListParams{RunID: "ra", AfterSeq: ra[0].Seq, Limit: 1}), ra[1:2]),
		check(len(list(store.EventListParams{RunID: "ra", AfterSeq: e7.Seq})) == 0, "events after the last"),
		check(len(list(store.EventListParams{RunID: "r"})) == 0, "run id that prefixes others matched"),
		same("rb", list(store.EventListParams{RunID: "rb"}), []*store.Event{appended[1], appended[3], appended[5]}),
	); err != nil {
		t.Fatal(err)
	}
}

func testMeta(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error { return first(tx.MetaPut("schema", []byte("1")), tx.MetaPut("empty", nil)) })
	view(t, s, func(tx store.Tx) error {
		v, err := tx.MetaGet("schema")
		e, err2 := tx.MetaGet("empty")
		_, err3 := tx.MetaGet("nope")
		return first(err, err2, same("schema", v, []byte("1")), check(len(e) == 0, "empty value: %q", e), isNotFound("unknown key", err3))
	})
}

func testViewReadOnly(t *testing.T, s store.Store, _ Opener) {
	writes := map[string]func(tx store.Tx) error{
		"FlowVersionPut":     func(tx store.Tx) error { return tx.FlowVersionPut(&store.FlowVersion{Name: "f", Hash: "h"}) },
		"SourcePut":          func(tx store.Tx) error { return tx.SourcePut(&store.Source{Hash: "h"}) },
		"RunInsert":          func(tx store.Tx) error { return tx.RunInsert(newRun("r", "o", store.PhaseQueued)) },
		"RunUpdate":          func(tx store.Tx) error { return tx.RunUpdate(newRun("r", "o", store.PhaseQueued)) },
		"RunDelete":          func(tx store.Tx) error { return tx.RunDelete("r") },
		"ContinuationPut":    func(tx store.Tx) error { return tx.ContinuationPut("r", []byte("c")) },
		"ContinuationDelete": func(tx store.Tx) error { return tx.ContinuationDelete("r") },
		"DedupPut":           func(tx store.Tx) error { return tx.DedupPut(&store.Dedup{Owner: "o", RequestID: "q"}) },
		"DedupDelete":        func(tx store.Tx) error { return tx.DedupDelete("o", "q") },
		"TaskPut":            func(tx store.Tx) error { return tx.TaskPut(newTask("t", "r", t0)) },
		"TaskDelete":         func(tx store.Tx) error { return tx.TaskDelete("t") },
		"LeasePut":           func(tx store.Tx) error { return tx.LeasePut(&store.Lease{TaskID: "t"}) },
		"LeaseDelete":        func(tx store.Tx) error { return tx.LeaseDelete("t") },
		"IdemPut":            func(tx store.Tx) error { return tx.IdemPut(&store.Idem{Key: "k"}) },
		"DeadLetterPut":      func(tx store.Tx) error { return tx.DeadLetterPut(&store.DeadLetter{TaskID: "t"}) },
		"EventAppend":        func(tx store.Tx) error { return tx.EventAppend(&store.Event{RunID: "r"}) },
		"MetaPut":            func(tx store.Tx) error { return tx.MetaPut("k", []byte("v")) },
	}
	// Records exist, so a write that checked existence first would not
	// fail with ErrNotFound instead.
	update(t, s, func(tx store.Tx) error {
		return first(tx.RunInsert(newRun("r", "o", store.PhaseQueued)), tx.TaskPut(newTask("t", "r", t0)),
			tx.LeasePut(&store.Lease{TaskID: "t", Deadline: t0}), tx.ContinuationPut("r", []byte("c0")),
			tx.DedupPut(&store.Dedup{Owner: "o", RequestID: "q"}))
	})
	for name, w := range writes {
		err := s.View(ctx, w)
		if !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("%s in View: %v, want ErrReadOnly", name, err)
		}
	}
	view(t, s, func(tx store.Tx) error {
		c, err := tx.ContinuationGet("r")
		evs, err2 := tx.EventList(store.EventListParams{RunID: "r"})
		_, err3 := tx.MetaGet("k")
		return first(err, err2, same("continuation after a refused write", c, []byte("c0")),
			check(len(evs) == 0, "event appended in a View"), isNotFound("meta written in a View", err3))
	})
}

func testReadYourWrites(t *testing.T, s store.Store, _ Opener) {
	// Committed state the Update then changes.
	update(t, s, func(tx store.Tx) error {
		return first(tx.RunInsert(newRun("old", "o", store.PhaseQueued)), tx.TaskPut(newTask("t-old", "r", at(time.Second))),
			tx.TaskPut(newTask("t-gone", "r", at(2*time.Second))))
	})
	update(t, s, func(tx store.Tx) error {
		if err := first(
			tx.RunInsert(newRun("new", "o", store.PhaseQueued)),
			tx.TaskPut(newTask("t-new", "r", at(1500*time.Millisecond))),
			tx.TaskDelete("t-gone"),
			tx.EventAppend(&store.Event{RunID: "new", Type: "queued", At: t0}),
			tx.ContinuationPut("new", []byte("c")),
		); err != nil {
			return err
		}
		r, err := tx.RunGet("new")
		if err != nil {
			return fmt.Errorf("RunGet of a run inserted in this Update: %w", err)
		}
		runs, err := tx.RunList(store.RunListParams{Owner: "o"})
		if err != nil {
			return err
		}
		ready, err := tx.TaskListReady(at(time.Hour), 0)
		if err != nil {
			return err
		}
		byRun, err := tx.TaskListByRun("r")
		if err != nil {
			return err
		}
		q, _, err := tx.TaskCount()
		if err != nil {
			return err
		}
		evs, err := tx.EventList(store.EventListParams{RunID: "new"})
		if err != nil {
			return err
		}
		c, err := tx.ContinuationGet("new")
		_, gone := tx.TaskGet("t-gone")
		return first(err,
			same("run", r.ID, "new"),
			same("RunList merges committed and new", runIDs(runs), []string{"new", "old"}),
			same("TaskListReady merges, hides the deleted", taskIDs(ready), []string{"t-old", "t-new"}),
			same("TaskListByRun", taskIDs(byRun), []string{"t-new", "t-old"}),
			check(q == 2, "TaskCount inside the Update: %d queued, want 2", q),
			check(len(evs) == 1 && evs[0].Type == "queued", "EventList inside the Update: %d events", len(evs)),
			same("continuation", c, []byte("c")),
			isNotFound("task deleted in this Update", gone))
	})
	// Overwriting a key twice in one Update keeps the last value.
	update(t, s, func(tx store.Tx) error {
		tk := newTask("t-old", "r", at(5*time.Second))
		if err := tx.TaskPut(tk); err != nil {
			return err
		}
		tk.ReadyAt = at(500 * time.Millisecond)
		return tx.TaskPut(tk)
	})
	view(t, s, func(tx store.Tx) error {
		ready, err := tx.TaskListReady(at(time.Hour), 0)
		return first(err, same("after two puts in one Update", taskIDs(ready), []string{"t-old", "t-new"}))
	})
}

var errBoom = errors.New("boom")

func testFnError(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error { return tx.TaskPut(newTask("keep", "r", t0)) })
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := first(tx.RunInsert(newRun("r", "o", store.PhaseQueued)), tx.TaskPut(newTask("t", "r", t0)),
			tx.TaskDelete("keep"), tx.EventAppend(&store.Event{RunID: "r"}), tx.MetaPut("k", []byte("v"))); err != nil {
			return err
		}
		return fmt.Errorf("step failed: %w", errBoom)
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	view(t, s, func(tx store.Tx) error {
		_, e1 := tx.RunGet("r")
		_, e2 := tx.TaskGet("t")
		_, e3 := tx.TaskGet("keep")
		_, e4 := tx.MetaGet("k")
		evs, e5 := tx.EventList(store.EventListParams{RunID: "r"})
		q, l, e6 := tx.TaskCount()
		ready, e7 := tx.TaskListReady(at(time.Hour), 0)
		return first(isNotFound("run of a failed Update", e1), isNotFound("task of a failed Update", e2),
			check(e3 == nil, "task deleted by a failed Update is gone: %v", e3),
			isNotFound("meta of a failed Update", e4), e5, e6, e7,
			check(len(evs) == 0, "event of a failed Update kept"),
			check(q == 1 && l == 0, "TaskCount after a failed Update: %d, %d; want 1, 0", q, l),
			same("queue after a failed Update", taskIDs(ready), []string{"keep"}))
	})
}

// testConcurrentFnErrors runs failing and succeeding functions at once, so
// a group-committing backend puts them in the same batch: exactly the
// failing functions' writes must vanish.
func testConcurrentFnErrors(t *testing.T, s store.Store, _ Opener) {
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Update(ctx, func(tx store.Tx) error {
				id := fmt.Sprintf("r%02d", i)
				if err := first(tx.RunInsert(newRun(id, "o", store.PhaseQueued)),
					tx.TaskPut(newTask("t"+id, id, at(time.Duration(i)))),
					tx.EventAppend(&store.Event{RunID: id, Type: "queued"})); err != nil {
					return err
				}
				if i%3 == 0 {
					return errBoom
				}
				return nil
			})
		})
	}
	wg.Wait()
	var want []string
	for i, err := range errs {
		if i%3 == 0 {
			if !errors.Is(err, errBoom) {
				t.Fatalf("Update %d: %v, want errBoom", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
		want = append(want, fmt.Sprintf("r%02d", i))
	}
	view(t, s, func(tx store.Tx) error {
		runs, err := tx.RunList(store.RunListParams{})
		ready, err2 := tx.TaskListReady(at(time.Hour), 0)
		q, _, err3 := tx.TaskCount()
		var events int
		for _, id := range want {
			evs, err := tx.EventList(store.EventListParams{RunID: id})
			if err != nil {
				return err
			}
			events += len(evs)
		}
		var taskRuns []string
		for _, tk := range ready {
			taskRuns = append(taskRuns, tk.RunID)
		}
		return first(err, err2, err3,
			same("runs of the successful Updates", runIDs(runs), want),
			same("tasks of the successful Updates, in ready order", taskRuns, want),
			check(q == len(want), "TaskCount %d, want %d", q, len(want)),
			check(events == len(want), "%d events, want %d", events, len(want)))
	})
}

func testConcurrentUpdates(t *testing.T, s store.Store, _ Opener) {
	const goroutines, each = 64, 20
	seqs := make([][]uint64, goroutines)
	updateConcurrently(t, []store.Store{s}, goroutines, each, func(s store.Store, g, i int) error {
		id := fmt.Sprintf("g%02d-%02d", g, i)
		e := &store.Event{RunID: id, Type: "queued"}
		err := s.Update(ctx, func(tx store.Tx) error {
			return first(tx.RunInsert(newRun(id, fmt.Sprint("o", g), store.PhaseQueued)),
				tx.TaskPut(newTask("t-"+id, id, t0)), tx.EventAppend(e))
		})
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		seqs[g] = append(seqs[g], e.Seq)
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		runs, err := tx.RunList(store.RunListParams{})
		q, _, err2 := tx.TaskCount()
		ready, err3 := tx.TaskListReady(t0, 0)
		if err := first(err, err2, err3,
			check(len(runs) == goroutines*each, "%d runs, want %d", len(runs), goroutines*each),
			check(q == goroutines*each, "TaskCount %d, want %d", q, goroutines*each),
			check(len(ready) == goroutines*each, "%d ready tasks, want %d", len(ready), goroutines*each)); err != nil {
			return err
		}
		seen := map[uint64]bool{}
		for g := range goroutines {
			for i, seq := range seqs[g] {
				if seen[seq] {
					return fmt.Errorf("seq %d handed out twice", seq)
				}
				seen[seq] = true
				if i > 0 && seq <= seqs[g][i-1] {
					return fmt.Errorf("goroutine %d: Seq %d after %d", g, seq, seqs[g][i-1])
				}
				id := fmt.Sprintf("g%02d-%02d", g, i)
				evs, err := tx.EventList(store.EventListParams{RunID: id})
				if err != nil {
					return err
				}
				if len(evs) != 1 || evs[0].Seq != seq {
					return fmt.Errorf("%s: events %v, want one with Seq %d", id, evs, seq)
				}
			}
		}
		return nil
	})
}

// testReadModifyWrite increments one counter from many goroutines: if
// functions were not isolated from each other, increments would be lost.
func testReadModifyWrite(t *testing.T, s store.Store, _ Opener) {
	IncrementConcurrently(t, []store.Store{s}, 32, 10)
}

// IncrementConcurrently increments one counter (meta key "n") each times
// from each of goroutines goroutines, spread over stores (all on the same
// data), and checks that no increment was lost: each read-modify-write is
// isolated from the others, within one store and across stores alike.
func IncrementConcurrently(t *testing.T, stores []store.Store, goroutines, each int) {
	t.Helper()
	updateConcurrently(t, stores, goroutines, each, func(s store.Store, _, _ int) error {
		return s.Update(ctx, func(tx store.Tx) error {
			n := 0
			b, err := tx.MetaGet("n")
			switch {
			case err == nil:
				if n, err = strconv.Atoi(string(b)); err != nil {
					return err
				}
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			return tx.MetaPut("n", strconv.AppendInt(nil, int64(n+1), 10))
		})
	})
	view(t, stores[0], func(tx store.Tx) error {
		b, err := tx.MetaGet("n")
		return first(err, same("counter", string(b), fmt.Sprint(goroutines*each)))
	})
}

func testDurability(t *testing.T, s store.Store, open Opener) {
	v := &store.FlowVersion{Name: "f", Hash: "h", IR: json.RawMessage(`{}`), RegisteredAt: t0}
	r := newRun("r1", "o", store.PhaseRunning)
	parked := newTask("t1", "r1", at(time.Hour))
	parked.WaitChild = "child"
	leased := newTask("t2", "r1", t0)
	leased.Leased = true
	l := &store.Lease{TaskID: "t2", RunID: "r1", Deadline: at(time.Second), Holder: "h"}
	e := &store.Event{RunID: "r1", Type: "leased", At: t0}
	update(t, s, func(tx store.Tx) error {
		return first(tx.FlowVersionPut(v), tx.RunInsert(r), tx.TaskPut(parked), tx.TaskPut(leased), tx.LeasePut(l),
			tx.ContinuationPut("r1", []byte("pos")), tx.EventAppend(e), tx.MetaPut("k", []byte("v")),
			tx.DedupPut(&store.Dedup{Owner: "o", RequestID: "q", RunID: "r1"}))
	})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2 := open(t)
	view(t, s2, func(tx store.Tx) error {
		gv, e1 := tx.FlowVersionLatest("f")
		gr, e2 := tx.RunGet("r1")
		byChild, e3 := tx.TaskByChild("child")
		q, lc, e4 := tx.TaskCount()
		ready, e5 := tx.TaskListReady(at(time.Hour), 0)
		exp, e6 := tx.LeaseListExpired(at(time.Minute), 0)
		c, e7 := tx.ContinuationGet("r1")
		evs, e8 := tx.EventList(store.EventListParams{RunID: "r1"})
		d, e9 := tx.DedupGet("o", "q")
		return first(e1, e2, e3, e4, e5, e6, e7, e8, e9,
			same("flow version", gv, v), same("run", gr, r), same("task by child", byChild, parked),
			check(q == 1 && lc == 1, "TaskCount %d, %d; want 1, 1", q, lc),
			same("ready", taskIDs(ready), []string{"t1"}),
			check(len(exp) == 1 && exp[0].TaskID == "t2", "expired leases: %d", len(exp)),
			same("continuation", c, []byte("pos")), same("events", evs, []*store.Event{e}),
			same("dedup run", d.RunID, "r1"))
	})
	// The event sequence continues past the reopen.
	e2 := &store.Event{RunID: "r1", Type: "completed", At: t0}
	update(t, s2, func(tx store.Tx) error { return tx.EventAppend(e2) })
	if e2.Seq <= e.Seq {
		t.Fatalf("Seq after reopen %d, not above %d", e2.Seq, e.Seq)
	}
}

func testClosed(t *testing.T, s store.Store, _ Opener) {
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Update(ctx, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	if err := s.View(ctx, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

func testContextCancelled(t *testing.T, s store.Store, _ Opener) {
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	ran := false
	err := s.Update(cctx, func(tx store.Tx) error {
		ran = true
		return tx.MetaPut("k", []byte("v"))
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context: %v, want context.Canceled", err)
	}
	if ran {
		t.Fatal("the function of an Update with a cancelled context ran")
	}
	view(t, s, func(tx store.Tx) error {
		_, err := tx.MetaGet("k")
		return isNotFound("meta of a cancelled Update", err)
	})
}
