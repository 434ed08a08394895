package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

func newOwnerEvent(owner, id string, accepted time.Time) *store.OwnerEvent {
	return &store.OwnerEvent{Owner: owner, ID: id, Name: "ticket.updated", Key: "T-42",
		Payload: json.RawMessage(`{"n":1}`), PayloadHash: "ph-" + id, AcceptedAt: accepted}
}

// eventIDs names events as owner/id.
func eventIDs(es []*store.OwnerEvent) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Owner+"/"+e.ID)
	}
	return out
}

// testOwnerEvents: an event round-trips with the Seq the store gave it
// (one more than its owner's last, counted per owner and never reused
// after a delete), keeps its Seq when replaced, and is one per (owner,
// id).
func testOwnerEvents(t *testing.T, s store.Store, _ Opener) {
	a1, a2, b1 := newOwnerEvent("alice", "e1", t0), newOwnerEvent("alice", "e2", at(time.Second)), newOwnerEvent("bob", "e1", t0)
	a1.Seq = 99 // the store's to set
	update(t, s, func(tx store.Tx) error {
		if err := first(tx.OwnerEventPut(a1), tx.OwnerEventPut(a2), tx.OwnerEventPut(b1)); err != nil {
			return err
		}
		got, err := tx.OwnerEventGet("alice", "e2")
		return first(err, same("read inside the transaction", got, a2))
	})
	if err := first(check(a1.Seq == 1 && a2.Seq == 2, "alice's Seqs %d, %d, want 1, 2", a1.Seq, a2.Seq),
		check(b1.Seq == 1, "bob's first Seq %d, want 1 (Seq is per owner)", b1.Seq)); err != nil {
		t.Fatal(err)
	}
	get := func(owner, id string) (*store.OwnerEvent, error) {
		return readErr(s, func(tx store.Tx) (*store.OwnerEvent, error) { return tx.OwnerEventGet(owner, id) })
	}
	gotA, errA := get("alice", "e1")
	gotB, errB := get("bob", "e1")
	_, errC := get("carol", "e1")
	if err := first(errA, errB, same("alice's e1", gotA, a1), same("bob's e1, the same id", gotB, b1),
		isNotFound("another owner's id", errC)); err != nil {
		t.Fatal(err)
	}
	// A replace (a delivery recorded) keeps the Seq whatever it is given.
	re := *a1
	re.Seq, re.Delivered = 0, []string{"run1/wait@1"}
	update(t, s, func(tx store.Tx) error { return tx.OwnerEventPut(&re) })
	got, err := get("alice", "e1")
	if err := first(err, check(re.Seq == 1, "replace wrote Seq %d into the event, want 1", re.Seq), same("replaced", got, &re)); err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx store.Tx) error { return tx.OwnerEventDelete("alice", "e2") })
	a3 := newOwnerEvent("alice", "e3", at(2*time.Second))
	update(t, s, func(tx store.Tx) error { return tx.OwnerEventPut(a3) })
	_, err = get("alice", "e2")
	if err := first(isNotFound("deleted", err), check(a3.Seq == 3, "Seq after a delete %d, want 3 (never reused)", a3.Seq)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.OwnerEventDelete("alice", "e2") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
	for _, bad := range []*store.OwnerEvent{newOwnerEvent("", "x", t0), newOwnerEvent("alice", "", t0), newOwnerEvent("alice", "a\x00b", t0)} {
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.OwnerEventPut(bad) }); !errors.Is(err, store.ErrBadID) {
			t.Errorf("event %q of %q: %v, want ErrBadID", bad.ID, bad.Owner, err)
		}
	}
}

// testOwnerEventList: an owner's events in Seq order, paged by AfterSeq
// and Limit, filtered to the undelivered ones; the pending ones of every
// owner; the oldest accepted across owners for retention; the count per
// owner. Every index follows a replace and a delete.
func testOwnerEventList(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error {
		for i, owner := range []string{"bob", "alice", "alice", "bob", "alice", "alice"} {
			e := newOwnerEvent(owner, fmt.Sprint("e", i), at(time.Duration(10-i)*time.Second))
			e.TriggersPending = i%2 == 0
			if i == 2 {
				e.Delivered = []string{"run1/wait@1"}
			}
			if err := tx.OwnerEventPut(e); err != nil {
				return err
			}
		}
		inside, err := tx.OwnerEventList(store.OwnerEventListParams{Owner: "alice", TriggersPending: true})
		return first(err, same("pending inside the transaction", eventIDs(inside), []string{"alice/e2", "alice/e4"}))
	})
	list := func(p store.OwnerEventListParams) []string {
		return eventIDs(read(t, s, func(tx store.Tx) ([]*store.OwnerEvent, error) { return tx.OwnerEventList(p) }))
	}
	before := func(tm time.Time, limit int) []string {
		return eventIDs(read(t, s, func(tx store.Tx) ([]*store.OwnerEvent, error) { return tx.OwnerEventListBefore(tm, limit) }))
	}
	count := func(owner string) int {
		return read(t, s, func(tx store.Tx) (int, error) { return tx.OwnerEventCount(owner) })
	}
	// alice's events are e1..e2..e4..e5 with Seqs 1..4; bob's e0, e3.
	checkListings(t, []listing{
		{"alice in Seq order", list(store.OwnerEventListParams{Owner: "alice"}), []string{"alice/e1", "alice/e2", "alice/e4", "alice/e5"}},
		{"after Seq 2", list(store.OwnerEventListParams{Owner: "alice", AfterSeq: 2}), []string{"alice/e4", "alice/e5"}},
		{"a page", list(store.OwnerEventListParams{Owner: "alice", AfterSeq: 1, Limit: 2}), []string{"alice/e2", "alice/e4"}},
		{"after the last", list(store.OwnerEventListParams{Owner: "alice", AfterSeq: 4}), []string{}},
		{"after every Seq", list(store.OwnerEventListParams{Owner: "alice", AfterSeq: ^uint64(0)}), []string{}},
		{"undelivered, limited after the filter", list(store.OwnerEventListParams{Owner: "alice", Undelivered: true, Limit: 2}), []string{"alice/e1", "alice/e4"}},
		{"pending of every owner", list(store.OwnerEventListParams{TriggersPending: true}), []string{"alice/e2", "alice/e4", "bob/e0"}},
		{"pending and undelivered", list(store.OwnerEventListParams{TriggersPending: true, Undelivered: true, Limit: 1}), []string{"alice/e4"}},
		{"every owner's", list(store.OwnerEventListParams{}), []string{"alice/e1", "alice/e2", "alice/e4", "alice/e5", "bob/e0", "bob/e3"}},
		{"nobody's", list(store.OwnerEventListParams{Owner: "carol"}), []string{}},
		{"an owner that prefixes another", list(store.OwnerEventListParams{Owner: "ali"}), []string{}},
		{"before, oldest first", before(at(8*time.Second), 0), []string{"alice/e5", "alice/e4", "bob/e3"}},
		{"before is exclusive, bounded", before(at(7*time.Second), 1), []string{"alice/e5"}},
		{"nothing that old", before(at(5*time.Second), 0), []string{}},
	})
	if a, b, c := count("alice"), count("bob"), count("carol"); a != 4 || b != 2 || c != 0 {
		t.Errorf("counts %d, %d, %d, want 4, 2, 0", a, b, c)
	}
	// Triggers started, a delivery, a re-acceptance and a retention
	// delete: each index follows.
	update(t, s, func(tx store.Tx) error {
		e4, err := tx.OwnerEventGet("alice", "e4")
		if err != nil {
			return err
		}
		e4.TriggersPending, e4.Delivered, e4.AcceptedAt = false, []string{"run2/wait@1"}, at(time.Hour)
		return first(tx.OwnerEventPut(e4), tx.OwnerEventDelete("bob", "e3"), tx.OwnerEventPut(newOwnerEvent("bob", "e3", at(time.Minute))))
	})
	checkListings(t, []listing{
		{"pending after the starts", list(store.OwnerEventListParams{TriggersPending: true}), []string{"alice/e2", "bob/e0"}},
		{"undelivered after a delivery", list(store.OwnerEventListParams{Owner: "alice", Undelivered: true}), []string{"alice/e1", "alice/e5"}},
		{"a deleted id accepted again comes last", list(store.OwnerEventListParams{Owner: "bob"}), []string{"bob/e0", "bob/e3"}},
		{"before, after the moves", before(at(2*time.Hour), 0), []string{"alice/e5", "alice/e2", "alice/e1", "bob/e0", "bob/e3", "alice/e4"}},
	})
	e3 := read(t, s, func(tx store.Tx) (*store.OwnerEvent, error) { return tx.OwnerEventGet("bob", "e3") })
	if e3.Seq != 3 {
		t.Errorf("bob's e3 accepted again: Seq %d, want 3", e3.Seq)
	}
	if a, b := count("alice"), count("bob"); a != 4 || b != 2 {
		t.Errorf("counts after the moves %d, %d, want 4, 2", a, b)
	}
}

// testEventSlots: a slot round-trips under (owner, name, key), the key
// may be empty, a put that leaves it without waits and events removes
// it, and a slot no backend could key is refused.
func testEventSlots(t *testing.T, s store.Store, _ Opener) {
	slot := func(key string) *store.EventSlot {
		return &store.EventSlot{Owner: "alice", Name: "ticket.updated", Key: key,
			Waits: []store.EventSlotWait{{RunID: "run1", WaitID: "w@1", Since: t0}}, Kept: []string{"e1"}}
	}
	get := func(owner, name, key string) (*store.EventSlot, error) {
		return readErr(s, func(tx store.Tx) (*store.EventSlot, error) { return tx.EventSlotGet(owner, name, key) })
	}
	if _, err := get("alice", "ticket.updated", "T-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a slot never written: %v, want ErrNotFound", err)
	}
	update(t, s, func(tx store.Tx) error { return first(tx.EventSlotPut(slot("T-1")), tx.EventSlotPut(slot(""))) })
	for _, key := range []string{"T-1", ""} {
		got, err := get("alice", "ticket.updated", key)
		if err := first(err, same("slot "+key, got, slot(key))); err != nil {
			t.Fatal(err)
		}
	}
	for _, other := range [][3]string{{"bob", "ticket.updated", "T-1"}, {"alice", "ticket.created", "T-1"}, {"alice", "ticket.updated", "T-2"}, {"alice", "ticket.updated\x00T-1", ""}} {
		if _, err := get(other[0], other[1], other[2]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("slot %q: %v, want ErrNotFound", other, err)
		}
	}
	// The last wait leaves with the last kept event: the slot goes.
	update(t, s, func(tx store.Tx) error {
		sl, err := tx.EventSlotGet("alice", "ticket.updated", "T-1")
		if err != nil {
			return err
		}
		sl.Waits, sl.Kept = nil, nil
		if err := tx.EventSlotPut(sl); err != nil {
			return err
		}
		_, err = tx.EventSlotGet("alice", "ticket.updated", "T-1")
		return isNotFound("emptied slot inside the transaction", err)
	})
	_, err := get("alice", "ticket.updated", "T-1")
	_, errKept := get("alice", "ticket.updated", "")
	if err := first(isNotFound("emptied slot", err), errKept); err != nil {
		t.Fatal(err)
	}
	// An empty slot never written is no error and leaves nothing.
	update(t, s, func(tx store.Tx) error {
		return tx.EventSlotPut(&store.EventSlot{Owner: "alice", Name: "ticket.updated", Key: "T-9"})
	})
	if _, err := get("alice", "ticket.updated", "T-9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an empty put: %v, want ErrNotFound", err)
	}
	long := strings.Repeat("k", store.MaxIDBytes)
	for _, bad := range []*store.EventSlot{
		{Owner: "", Name: "n", Kept: []string{"e"}},
		{Owner: "alice", Name: "", Kept: []string{"e"}},
		{Owner: "alice", Name: "n", Key: "a\x00b", Kept: []string{"e"}},
		{Owner: "alice", Name: long, Key: long, Kept: []string{"e"}},
	} {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.EventSlotPut(bad) })
		if !errors.Is(err, store.ErrBadID) || len(err.Error()) > 200 {
			t.Errorf("slot (%.10q, %.10q, %.10q): %v, want a short ErrBadID", bad.Owner, bad.Name, bad.Key, err)
		}
	}
}

// testEventSlotConcurrent: Updates that each read the slot and write it
// back with an addition of their own lose none of them.
func testEventSlotConcurrent(t *testing.T, s store.Store, _ Opener) {
	AddToSlotConcurrently(t, []store.Store{s}, 16, 5)
}

// AddToSlotConcurrently adds one kept event id from each Update of each
// of goroutines goroutines, spread over stores (all on the same data), to
// one slot, by reading it (absent at first) and putting it back with the
// addition: as an event's acceptance and a wait's opening do. Afterwards
// the slot holds every id once: two functions that read the same slot
// never both commit their write. A backend's Update runs a conflicted
// function again (pgstore) or never lets two overlap (memstore,
// badgerstore), so an error here is a failure, never the caller's retry.
func AddToSlotConcurrently(t *testing.T, stores []store.Store, goroutines, each int) {
	t.Helper()
	updateConcurrently(t, stores, goroutines, each, func(s store.Store, g, i int) error {
		id := fmt.Sprintf("g%02d-%02d", g, i)
		err := s.Update(ctx, func(tx store.Tx) error {
			sl, err := tx.EventSlotGet("alice", "ticket.updated", "T-42")
			if errors.Is(err, store.ErrNotFound) {
				sl, err = &store.EventSlot{Owner: "alice", Name: "ticket.updated", Key: "T-42"}, nil
			}
			if err != nil {
				return err
			}
			sl.Kept = append(sl.Kept, id)
			return tx.EventSlotPut(sl)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		return nil
	})
	sl := read(t, stores[0], func(tx store.Tx) (*store.EventSlot, error) { return tx.EventSlotGet("alice", "ticket.updated", "T-42") })
	var want []string
	for g := range goroutines {
		for i := range each {
			want = append(want, fmt.Sprintf("g%02d-%02d", g, i))
		}
	}
	got := slices.Sorted(slices.Values(sl.Kept))
	if !slices.Equal(got, want) {
		t.Fatalf("slot keeps %d ids, want %d, each once: %v", len(got), len(want), got)
	}
}

// testOwnerEventsConcurrent: concurrent acceptances for one owner draw
// distinct Seqs.
func testOwnerEventsConcurrent(t *testing.T, s store.Store, _ Opener) {
	AcceptConcurrently(t, []store.Store{s}, 16, 5)
}

// AcceptConcurrently puts a new event of one owner from each Update of
// each of goroutines goroutines, spread over stores (all on the same
// data), and checks that the owner's Seqs are 1 to the number of events,
// each once, in the order the events list in, and that the count agrees.
func AcceptConcurrently(t *testing.T, stores []store.Store, goroutines, each int) {
	t.Helper()
	updateConcurrently(t, stores, goroutines, each, func(s store.Store, g, i int) error {
		e := newOwnerEvent("alice", fmt.Sprintf("g%02d-%02d", g, i), t0)
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.OwnerEventPut(e) }); err != nil {
			return fmt.Errorf("%s: %w", e.ID, err)
		}
		return nil
	})
	n := goroutines * each
	view(t, stores[0], func(tx store.Tx) error {
		es, err := tx.OwnerEventList(store.OwnerEventListParams{Owner: "alice"})
		if err != nil {
			return err
		}
		c, err := tx.OwnerEventCount("alice")
		if err != nil {
			return err
		}
		seqs := []uint64{}
		for _, e := range es {
			seqs = append(seqs, e.Seq)
		}
		want := []uint64{}
		for i := range n {
			want = append(want, uint64(i+1))
		}
		return first(same("Seqs in list order", seqs, want), check(c == n, "count %d, want %d", c, n))
	})
}

// testTriggers: triggers round-trip under (owner, name), are listed by
// owner and by event in name order, and a replace that changes the event
// moves the trigger between the event lists.
func testTriggers(t *testing.T, s store.Store, _ Opener) {
	trig := func(owner, name, event string) *store.Trigger {
		return &store.Trigger{Owner: owner, Name: name, Event: event, Flow: "triage", InputFn: "input", FilterFn: "filter",
			SourceHash: "sh", Source: "triage.star:7", CreatedAt: t0, UpdatedAt: t0}
	}
	update(t, s, func(tx store.Tx) error {
		return first(
			tx.TriggerPut(trig("alice", "triage_on_ticket_created", "ticket.created")),
			tx.TriggerPut(trig("alice", "audit", "ticket.created")),
			tx.TriggerPut(trig("alice", "notify", "ticket.updated")),
			tx.TriggerPut(trig("bob", "triage_on_ticket_created", "ticket.created")),
		)
	})
	got, err := readErr(s, func(tx store.Tx) (*store.Trigger, error) { return tx.TriggerGet("alice", "notify") })
	_, errOther := readErr(s, func(tx store.Tx) (*store.Trigger, error) { return tx.TriggerGet("carol", "notify") })
	if err := first(err, same("round trip", got, trig("alice", "notify", "ticket.updated")), isNotFound("another owner's", errOther)); err != nil {
		t.Fatal(err)
	}
	names := func(ts []*store.Trigger) []string {
		out := []string{}
		for _, x := range ts {
			out = append(out, x.Owner+"/"+x.Name)
		}
		return out
	}
	byEvent := func(owner, event string) []string {
		return names(read(t, s, func(tx store.Tx) ([]*store.Trigger, error) { return tx.TriggerListByEvent(owner, event) }))
	}
	byOwner := func(owner string, limit int) []string {
		return names(read(t, s, func(tx store.Tx) ([]*store.Trigger, error) { return tx.TriggerList(owner, limit) }))
	}
	checkListings(t, []listing{
		{"alice on ticket.created", byEvent("alice", "ticket.created"), []string{"alice/audit", "alice/triage_on_ticket_created"}},
		{"an event that prefixes another", byEvent("alice", "ticket"), []string{}},
		{"alice's", byOwner("alice", 0), []string{"alice/audit", "alice/notify", "alice/triage_on_ticket_created"}},
		{"alice's, limited", byOwner("alice", 2), []string{"alice/audit", "alice/notify"}},
		{"nobody's", byOwner("carol", 0), []string{}},
	})
	update(t, s, func(tx store.Tx) error {
		return first(tx.TriggerPut(trig("alice", "audit", "ticket.updated")), tx.TriggerDelete("bob", "triage_on_ticket_created"))
	})
	checkListings(t, []listing{
		{"after a move, created", byEvent("alice", "ticket.created"), []string{"alice/triage_on_ticket_created"}},
		{"after a move, updated", byEvent("alice", "ticket.updated"), []string{"alice/audit", "alice/notify"}},
		{"bob's after a delete", byEvent("bob", "ticket.created"), []string{}},
	})
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.TriggerDelete("bob", "triage_on_ticket_created") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
	for _, bad := range []*store.Trigger{trig("", "x", "e"), trig("alice", "", "e"), trig("alice", "x", ""), trig("alice", "x", "e\x00")} {
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.TriggerPut(bad) }); !errors.Is(err, store.ErrBadID) {
			t.Errorf("trigger %q/%q on %q: %v, want ErrBadID", bad.Owner, bad.Name, bad.Event, err)
		}
	}
}
