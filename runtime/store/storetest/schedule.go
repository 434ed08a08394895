package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// testSchedules: schedules round-trip, are listed by owner then name, and
// ScheduleListDue holds exactly those not paused whose next tick is due,
// earliest first, following every replace (a moved tick, a pause, a
// resume) and delete.
func testSchedules(t *testing.T, s store.Store, _ Opener) {
	sched := func(owner, name string, next time.Time) *store.Schedule {
		return &store.Schedule{Owner: owner, Name: name, Flow: "digest", Cron: "0 9 * * MON-FRI", Zone: "Europe/Paris",
			Input: json.RawMessage(`{"to":"team"}`), Overlap: "skip", CatchUp: "latest", Next: next, Source: "digest.star:3",
			Firings: []store.ScheduleFiring{{Tick: t0, RunID: "r1", At: t0}}, CreatedAt: t0, UpdatedAt: t0}
	}
	update(t, s, func(tx store.Tx) error {
		return first(
			tx.SchedulePut(sched("bob", "nightly", at(3*time.Minute))),
			tx.SchedulePut(sched("alice", "morning", at(2*time.Minute))),
			tx.SchedulePut(sched("alice", "hourly", at(time.Minute))),
			tx.SchedulePut(sched("alice", "later", at(time.Hour))),
		)
	})
	got := read(t, s, func(tx store.Tx) (*store.Schedule, error) { return tx.ScheduleGet("alice", "morning") })
	if want := sched("alice", "morning", at(2*time.Minute)); !equalJSON(got, want) {
		t.Fatalf("round trip:\n got  %+v\n want %+v", got, want)
	}
	if _, err := readErr(s, func(tx store.Tx) (*store.Schedule, error) { return tx.ScheduleGet("bob", "morning") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another owner's name: %v, want ErrNotFound", err)
	}
	names := func(ss []*store.Schedule) []string {
		out := []string{}
		for _, x := range ss {
			out = append(out, x.Owner+"/"+x.Name)
		}
		return out
	}
	list := func(p store.ScheduleListParams) []string {
		return names(read(t, s, func(tx store.Tx) ([]*store.Schedule, error) { return tx.ScheduleList(p) }))
	}
	due := func(now time.Time, limit int) []string {
		return names(read(t, s, func(tx store.Tx) ([]*store.Schedule, error) { return tx.ScheduleListDue(now, limit) }))
	}
	checkListings(t, []listing{
		{"all", list(store.ScheduleListParams{}), []string{"alice/hourly", "alice/later", "alice/morning", "bob/nightly"}},
		{"one owner", list(store.ScheduleListParams{Owner: "alice", Limit: 2}), []string{"alice/hourly", "alice/later"}},
		{"nobody's", list(store.ScheduleListParams{Owner: "carol"}), []string{}},
		{"due, earliest first", due(at(3*time.Minute), 0), []string{"alice/hourly", "alice/morning", "bob/nightly"}},
		{"due is inclusive, limited", due(at(2*time.Minute), 1), []string{"alice/hourly"}},
		{"nothing due yet", due(at(30*time.Second), 0), []string{}},
	})
	// A fired tick moves on, a pause leaves the index, a resume comes back.
	update(t, s, func(tx store.Tx) error {
		h := sched("alice", "hourly", at(time.Hour+time.Minute))
		m := sched("alice", "morning", at(2*time.Minute))
		m.Paused, m.PausedBy, m.PauseReason = true, "alice", "holiday"
		if err := first(tx.SchedulePut(h), tx.SchedulePut(m)); err != nil {
			return err
		}
		inside, err := tx.ScheduleListDue(at(3*time.Minute), 0)
		return first(err, same("due inside the transaction", names(inside), []string{"bob/nightly"}))
	})
	if got := due(at(2*time.Hour), 0); !slices.Equal(got, []string{"bob/nightly", "alice/later", "alice/hourly"}) {
		t.Errorf("after a tick and a pause: %v", got)
	}
	update(t, s, func(tx store.Tx) error {
		return first(tx.SchedulePut(sched("alice", "morning", at(2*time.Minute))), tx.ScheduleDelete("bob", "nightly"))
	})
	if got := due(at(2*time.Hour), 0); !slices.Equal(got, []string{"alice/morning", "alice/later", "alice/hourly"}) {
		t.Errorf("after a resume and a delete: %v", got)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.ScheduleDelete("bob", "nightly") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SchedulePut(sched("", "x", t0)) }); !errors.Is(err, store.ErrBadID) {
		t.Errorf("a schedule without an owner: %v, want ErrBadID", err)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func readErr[T any](s store.Store, fn func(tx store.Tx) (T, error)) (T, error) {
	var out T
	err := s.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}
