package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// wakeState is a completed subflow parent r1 whose child c1 was last
// leased by childHolder; the parent parked for it and went on under
// parentHolder ("" for a parent that never went on). holders maps holders
// to slots.
func wakeState(childHolder, parentHolder string, holders map[string]int) *state {
	s := newState()
	leased := func(h string) apitypes.Event { return ev("leased", "call", map[string]any{"holder": h}) }
	evs := []apitypes.Event{leased("hP"), ev("waiting", "call", map[string]any{"for": "child", "child": "c1"})}
	phase := apitypes.PhaseWaiting
	if parentHolder != "" {
		evs = append(evs, leased(parentHolder), ev("node_completed", "done", nil), ev("completed", "", nil))
		phase = apitypes.PhaseCompleted
	}
	s.run("r1", "soak_sub", map[string]any{"id": "req-r1", "n": 1}, phase, evs...)
	s.f.children["r1"] = []apitypes.Run{{ID: "c1", Parent: "r1", Flow: "soak_echo", Phase: apitypes.PhaseCompleted}}
	s.f.events["c1"] = []apitypes.Event{leased("hX"), ev("expired", "a", nil), leased(childHolder), ev("completed", "", nil)}
	s.f.records.hostOf = holders
	return s
}

// flakyGaveUp is a soak_flaky run planned to fail twice within its three
// retries that gave up anyway, its four attempts leased by holders.
func flakyGaveUp(holders []string, hostOf map[string]int) *state {
	s := newState()
	var evs []apitypes.Event
	for _, h := range holders {
		evs = append(evs, ev("leased", "try", map[string]any{"holder": h}), ev("retry_scheduled", "try", nil))
	}
	evs = append(evs, ev("node_failed", "try", map[string]any{"code": engine.CodeRetriesExhausted}), ev("completed", "", nil))
	v := s.run("r1", "soak_flaky", map[string]any{"id": "req-r1", "times": 2.0}, apitypes.PhaseCompleted, evs...)
	v.Output = json.RawMessage(`{"id":"req-r1","gave_up":true}`)
	s.f.records.hostOf = hostOf
	return s
}

func fleetViolationCases() []violationCase {
	return []violationCase{
		{"flaky call gave up within its retries on one host", func() (*world, *final) {
			s := flakyGaveUp([]string{"hA", "hB", "hA", "hB"}, map[string]int{"hA": 0, "hB": 0})
			return s.w, s.f
		}, checkOutputs, `want {"id":"req-r1","ok":true}`},
		{"flaky call gave up within its retries on a lone daemon", func() (*world, *final) {
			s := flakyGaveUp([]string{"hA", "hA", "hA", "hA"}, nil)
			return s.w, s.f
		}, checkOutputs, `want {"id":"req-r1","ok":true}`},
		{"flaky call whose attempts each host counted apart gave up", func() (*world, *final) {
			s := flakyGaveUp([]string{"hA", "hB", "hA", "hB"}, map[string]int{"hA": 0, "hB": 1})
			return s.w, s.f
		}, checkOutputs, ""},
		{"child woke its parent on another daemon", func() (*world, *final) {
			s := wakeState("hA", "hB", map[string]int{"hA": 0, "hB": 1, "hX": 1, "hP": 0})
			return s.w, s.f
		}, checkCrossWake, ""},
		{"every parent went on where its child ended", func() (*world, *final) {
			s := wakeState("hA", "hB", map[string]int{"hA": 0, "hB": 0, "hX": 1, "hP": 1})
			return s.w, s.f
		}, checkCrossWake, "of 1 subflow parents that went on after their child ended, none went on on another daemon"},
		{"the child's earlier holder does not count", func() (*world, *final) {
			// hX, on another slot than the parent, lost the child's lease:
			// the child ended on hA, the parent's own daemon.
			s := wakeState("hA", "hB", map[string]int{"hA": 1, "hB": 1, "hX": 0, "hP": 0})
			return s.w, s.f
		}, checkCrossWake, "none went on on another daemon"},
		{"no parent went on", func() (*world, *final) {
			s := wakeState("hA", "", map[string]int{"hA": 0, "hB": 1, "hX": 1, "hP": 1})
			return s.w, s.f
		}, checkCrossWake, "of 0 subflow parents"},
		{"holders of no known daemon", func() (*world, *final) {
			s := wakeState("hA", "hB", map[string]int{})
			return s.w, s.f
		}, checkCrossWake, "of 0 subflow parents"},
	}
}

// TestCheckFleet: a fleet the soak cannot run is refused with the reason.
func TestCheckFleet(t *testing.T) {
	t.Parallel()
	const pg = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
	for _, tt := range []struct {
		fleet    int
		store    string
		storeSet bool
		want     string // "" means accepted
	}{
		{0, pg, false, ""},
		{3, pg, true, ""},
		{2, "postgresql://u:secret@db/weir", true, ""},
		{1, pg, false, "a fleet is 2 or more daemons"},
		{-2, pg, false, "a fleet is 2 or more daemons"},
		{maxFleet + 1, pg, false, "at most 8 daemons"},
		{0, pg, true, "give -fleet N too"},
		{3, "mysql://u:secret@db/weir", true, "want a postgres:// URL"},
		{3, "/var/lib/weir", true, "want a postgres:// URL"},
	} {
		err := checkFleet(tt.fleet, tt.store, tt.storeSet)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkFleet(%d, %q): %v, want accepted", tt.fleet, tt.store, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("checkFleet(%d, %q): %v, want %q", tt.fleet, tt.store, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("checkFleet(%d, %q) shows the password: %v", tt.fleet, tt.store, err)
		}
	}
}

// TestHolderOf reads the holder from a daemon's start line, and nothing
// from a log without one.
func TestHolderOf(t *testing.T) {
	t.Parallel()
	log := "12:00:00 INFO store: postgres\n12:00:01 INFO recovered: holder=h_01JX7 rescued_leases=0 queued_runs=3\n"
	if got := holderOf(log); got != "h_01JX7" {
		t.Fatalf("holderOf: %q, want h_01JX7", got)
	}
	if got := holderOf("12:00:00 WARN lease lost\n"); got != "" {
		t.Fatalf("holderOf a log without a start line: %q, want none", got)
	}
}

// TestReadRecordsAcrossHosts: each daemon of a fleet keeps its plugins'
// state. Mails add up over the hosts; a note applied on two hosts under
// one idempotency key (one dedupe record on each, of one name) is applied
// under one key, and under two keys is two.
func TestReadRecordsAcrossHosts(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, rel, body string) {
		t.Helper()
		p := filepath.Join(dir, "plugin-state", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "mail/outbox.jsonl", `{"body":"soak req-1","run_id":"r1"}`+"\n")
	write(b, "mail/outbox.jsonl", `{"body":"soak req-1","run_id":"r1"}`+"\n"+`{"id":"m2","body":"soak req-2","run_id":"r2","idempotency_key":"km2","sent_at":"2026-12-07T10:00:00Z"}`+"\n")
	applied := func(key string) string { return `{"output":{"key":"` + key + `"}}` }
	write(a, "notes/notes/n1.json", `{"key":"soak/req-3","text":"t3"}`)
	write(a, "notes/dedupe/k3.json", applied("soak/req-3"))
	write(b, "notes/notes/n1.json", `{"key":"soak/req-3","text":"t3"}`)
	write(b, "notes/dedupe/k3.json", applied("soak/req-3"))
	write(a, "notes/dedupe/k4.json", applied("soak/req-4"))
	write(b, "notes/dedupe/k4-other.json", applied("soak/req-4"))
	// testkit.once's log; b's last line is still being written.
	write(a, "testkit/once.jsonl", `{"value":"req-5","key":"k5"}`+"\n")
	write(b, "testkit/once.jsonl", `{"value":"req-5","key":"k5"}`+"\n"+`{"value":"req-6","key":"k6"}`+"\n"+`{"value":"req-7","ke`)
	o, err := readRecords(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if o.once["req-5"] != 2 || o.once["req-6"] != 1 || len(o.once) != 2 {
		t.Fatalf("testkit.once effects over two hosts %v; want req-5 twice, req-6 once, the cut line not yet", o.once)
	}
	for key, want := range map[string]string{"k6": `{"value":"req-6","key":"k6"}`, "k7": ""} {
		got, happened, err := onceLogged([]string{a, b}, key)
		if err != nil || happened != (want != "") || string(got) != want {
			t.Fatalf("onceLogged(%s) = %s %v %v, want %q", key, got, happened, err, want)
		}
	}
	// A mail.send unknown outcome is resolved from the outbox of any host:
	// the call may have run on another daemon than the one that asks.
	for key, want := range map[string]string{"km2": `{"id":"m2","sent_at":"2026-12-07T10:00:00Z"}`, "km9": ""} {
		got, happened, err := mailLogged([]string{a, b}, key)
		if err != nil || happened != (want != "") || string(got) != want {
			t.Fatalf("mailLogged(%s) = %s %v %v, want %q", key, got, happened, err, want)
		}
	}
	if o.mailRuns["r1"] != 2 || o.mailRuns["r2"] != 1 || o.mails["req-1"] != 2 {
		t.Fatalf("mails over two hosts: %v by run, %v by request; want r1 twice, r2 once", o.mailRuns, o.mails)
	}
	if o.notes["soak/req-3"] != "t3" || o.applied["soak/req-3"] != 1 || o.applied["soak/req-4"] != 2 {
		t.Fatalf("notes %v applied %v; want req-3 under one key, req-4 under two", o.notes, o.applied)
	}
	if bad := checkMailOnce(&world{}, &final{runs: []apitypes.Run{{ID: "r1"}, {ID: "r2"}}, records: o}); len(bad) == 0 {
		t.Fatal("a mail sent on two hosts for one run passed the at-most-once check")
	}
}

// TestSoakSchema makes a fleet soak's schema on the real database, which
// the daemons' store URL selects, and drops it.
func TestSoakSchema(t *testing.T) {
	t.Parallel()
	base := pgtest.Require(t)
	ctx := context.Background()
	s, err := newSchema(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	dropped := false
	t.Cleanup(func() {
		if !dropped {
			_ = s.Drop(ctx)
		}
	})
	if !strings.HasPrefix(s.name, "weir_soak_") || !strings.Contains(s.URL, "search_path="+s.name) {
		t.Fatalf("schema %q, URL %q", s.name, s.URL)
	}
	pgtest.Exec(t, s.URL, "CREATE TABLE probe (x int)")
	pgtest.Exec(t, base, "SELECT 1 FROM "+s.name+".probe")
	if err := s.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	dropped = true
	if err := s.exec(ctx, "SELECT 1 FROM "+s.name+".probe"); err == nil {
		t.Fatalf("schema %s still there after Drop", s.name)
	}
}

// TestNextInTurn: a lone daemon arms each failpoint once in its first
// epochs; a fleet re-arms each failpoint until it fired, one slot at a
// time, and then none.
func TestNextInTurn(t *testing.T) {
	t.Parallel()
	none := map[string]int{}
	for i, fp := range failpoints {
		if got := nextInTurn(i, false, none, nil); got != fp {
			t.Fatalf("lone daemon, epoch %d: %q, want %q", i, got, fp)
		}
	}
	if got := nextInTurn(len(failpoints), false, none, nil); got != "" {
		t.Fatalf("lone daemon after the failpoints' epochs: %q, want none", got)
	}
	kills := map[string]int{"random": 9}
	armed := map[string]bool{failpoints[0]: true}
	if got := nextInTurn(40, true, kills, armed); got != failpoints[1] {
		t.Fatalf("fleet with %s armed: %q, want %q", failpoints[0], got, failpoints[1])
	}
	for _, fp := range failpoints[1:] {
		kills[fp] = 1
	}
	if got := nextInTurn(41, true, kills, armed); got != "" {
		t.Fatalf("fleet with the last unfired failpoint armed elsewhere: %q, want none", got)
	}
	delete(armed, failpoints[0])
	if got := nextInTurn(42, true, kills, armed); got != failpoints[0] {
		t.Fatalf("fleet whose armed failpoint did not fire: %q, want it again", got)
	}
	kills[failpoints[0]] = 1
	if got := nextInTurn(43, true, kills, armed); got != "" {
		t.Fatalf("fleet with every failpoint fired: %q, want none", got)
	}
}
