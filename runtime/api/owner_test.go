package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// snapshot is everything the store holds about one run, as bytes: the run
// record (phase, finish record, cancel state), its continuation, tasks,
// leases, dedup key and events.
func (b *bundle) snapshot(t *testing.T, run *store.Run) []byte {
	t.Helper()
	var out bytes.Buffer
	err := b.st.View(context.Background(), func(tx store.Tx) error {
		part := func(name string, v any, err error) error {
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			j, jerr := json.Marshal(v)
			if jerr != nil {
				return jerr
			}
			fmt.Fprintf(&out, "%s %v\n%s\n", name, err, j)
			return nil
		}
		r, err := tx.RunGet(run.ID)
		if err := part("run", r, err); err != nil {
			return err
		}
		c, err := tx.ContinuationGet(run.ID)
		if err := part("continuation", c, err); err != nil {
			return err
		}
		tasks, err := tx.TaskListByRun(run.ID)
		if err := part("tasks", tasks, err); err != nil {
			return err
		}
		for _, k := range tasks {
			l, err := tx.LeaseGet(k.ID)
			if err := part("lease "+k.ID, l, err); err != nil {
				return err
			}
		}
		d, err := tx.DedupGet(run.Owner, run.RequestID)
		if err := part("dedup", d, err); err != nil {
			return err
		}
		evs, err := tx.EventList(store.EventListParams{RunID: run.ID})
		return part("events", evs, err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func (b *bundle) auditEvents(t *testing.T) []*store.Event {
	t.Helper()
	var evs []*store.Event
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: engine.AuditStream})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// Two owners on one daemon, told apart only by their bearer tokens (and a
// third, the local OS user, by the socket): none can see, cancel or read
// the events of another's runs. A foreign attempt is answered exactly like
// a missing run, and the runs are byte-for-byte unchanged afterwards; the
// one effect is an audit event per attempt.
func TestOwnersAreIsolated(t *testing.T) {
	t.Parallel()
	// One slot: alice's sleeping run holds it, her next run stays queued.
	// Long leases: no renewal changes the running run during the test.
	b := setup(t, engine.Config{Workers: 1, LeaseTimeout: 10 * time.Minute})

	done := b.start(t, alice, "echo", `{"n":1}`, "req-1")
	b.waitPhase(t, "alice", done, store.Phase.Terminal)
	running := b.start(t, alice, "sleep", `{"ms":60000}`, "req-2")
	b.waitPhase(t, "alice", running, func(p store.Phase) bool { return p == store.PhaseRunning })
	queued := b.start(t, alice, "echo", `{"n":3}`, "")
	b.waitPhase(t, "alice", queued, func(p store.Phase) bool { return p == store.PhaseQueued })

	ids := []string{done, running, queued}
	runs := map[string]*store.Run{}
	before := map[string][]byte{}
	for _, id := range ids {
		runs[id] = b.waitPhase(t, "alice", id, func(store.Phase) bool { return true })
		before[id] = b.snapshot(t, runs[id])
		if !bytes.Contains(before[id], []byte(`"type":"accepted"`)) || !bytes.Contains(before[id], []byte(`"owner":"alice"`)) {
			t.Fatalf("the snapshot of %s misses the run or its events:\n%s", id, before[id])
		}
	}
	b.st.takeWrites()

	// What a caller is told about a run that does not exist at all.
	missing := map[string]answer{
		"get":    b.send(t, bob, "GET", "/v1/runs/run_missing", nil),
		"cancel": b.send(t, bob, "POST", "/v1/runs/run_missing/cancel", nil),
		"events": b.send(t, bob, "GET", "/v1/runs/run_missing/events", nil),
	}
	// The engine audits a cancel of a missing run too (it refuses missing
	// and foreign runs alike): count the foreign attempts' events from here.
	b.st.takeWrites()
	auditBefore := len(b.auditEvents(t))

	attempts := 0
	for _, intruder := range []caller{bob, local} {
		for _, id := range ids {
			for action, a := range map[string]answer{
				"get":          b.send(t, intruder, "GET", "/v1/runs/"+id, nil),
				"cancel":       b.send(t, intruder, "POST", "/v1/runs/"+id+"/cancel", nil),
				"events":       b.send(t, intruder, "GET", "/v1/runs/"+id+"/events", nil),
				"events after": b.send(t, intruder, "GET", "/v1/runs/"+id+"/events?after=1&limit=5", nil),
				"cancel twice": b.send(t, intruder, "POST", "/v1/runs/"+id+"/cancel", nil),
			} {
				attempts++
				want := missing[strings.Fields(action)[0]]
				if a.status != 404 || want.status != 404 {
					t.Errorf("%s %s of alice's run: %d %s (a missing run: %d)", intruder.name, action, a.status, a.body, want.status)
					continue
				}
				// Byte for byte the answer for a missing run, but for the id.
				got := bytes.ReplaceAll(a.body, []byte(id), []byte("run_missing"))
				if !bytes.Equal(got, want.body) {
					t.Errorf("%s %s of alice's run answered %s, a missing run %s", intruder.name, action, a.body, want.body)
				}
			}
		}
		// Lists show only the caller's own runs.
		var vs []apitypes.Run
		if err := json.Unmarshal(b.send(t, intruder, "GET", "/v1/runs", nil).body, &vs); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if slices.Contains(ids, v.ID) || v.Owner != ownerName(b, intruder) {
				t.Errorf("%s's list shows run %s of %s", intruder.name, v.ID, v.Owner)
			}
		}
		var dls []*store.DeadLetter
		if err := json.Unmarshal(b.send(t, intruder, "GET", "/v1/deadletters", nil).body, &dls); err != nil {
			t.Fatal(err)
		}
		if len(dls) != 0 {
			t.Errorf("%s sees dead letters %+v", intruder.name, dls)
		}
	}

	// Nothing of alice's changed: not the run, its finish record, its
	// cancel state, its tasks, leases, dedup key or events.
	for _, id := range ids {
		if after := b.snapshot(t, runs[id]); !bytes.Equal(before[id], after) {
			t.Errorf("run %s (%s) changed after foreign attempts:\nbefore %s\nafter  %s", id, runs[id].Phase, before[id], after)
		}
	}
	// The only writes were audit events, one per attempt, naming the
	// intruder, the action and the run.
	for _, w := range b.st.takeWrites() {
		if w != "EventAppend "+engine.AuditStream {
			t.Errorf("a foreign attempt wrote %q", w)
		}
	}
	audit := b.auditEvents(t)[auditBefore:]
	if len(audit) != attempts {
		t.Errorf("%d audit events for %d foreign attempts", len(audit), attempts)
	}
	for _, e := range audit {
		caller, _ := e.Detail["caller"].(string)
		run, _ := e.Detail["run"].(string)
		if e.Type != "refused_foreign" || (caller != "bob" && caller != b.me) || !slices.Contains(ids, run) || e.Detail["action"] == "" {
			t.Errorf("audit event %+v", e)
		}
	}

	// The same request id is a different run for another owner.
	bobsRun := b.start(t, bob, "echo", `{"n":1}`, "req-1")
	if bobsRun == done {
		t.Error("bob's request id req-1 returned alice's run")
	}
	// And alice's own cancel still works: the foreign ones changed nothing.
	a := b.send(t, alice, "POST", "/v1/runs/"+running+"/cancel", nil)
	var cr apitypes.CancelResponse
	if err := json.Unmarshal(a.body, &cr); err != nil || cr.Answer != apitypes.CancelRequested {
		t.Errorf("alice's cancel: %d %s", a.status, a.body)
	}
	b.waitPhase(t, "alice", running, store.Phase.Terminal)
	a = b.send(t, alice, "GET", "/v1/runs/"+running, nil)
	var v apitypes.Run
	if err := json.Unmarshal(a.body, &v); err != nil || v.Phase != apitypes.PhaseCancelled {
		t.Errorf("alice's cancelled run: %s", a.body)
	}
}

func ownerName(b *bundle, c caller) string {
	if c.local {
		return b.me
	}
	return c.name
}
