package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

func (b *testBundle) migrate(p MigrateParams) (*MigrateResult, error) {
	if p.Owner == "" {
		p.Owner = "alice"
	}
	return b.eng.Ops().Migrate(context.Background(), p)
}

func (b *testBundle) approve(t *testing.T, id, node string) {
	t.Helper()
	if err := b.eng.Decide(context.Background(), DecideParams{Owner: "alice", RunID: id, Node: node, Approve: true}); err != nil {
		t.Fatal(err)
	}
}

// A parked run migrated to the latest version goes on under it, and its
// timeline names both versions, who and why; a second migration finds it
// there and changes nothing.
func TestUnitMigrateMovesAParkedRun(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, parkedSrc)
	ids := b.parkedRuns(t, 2)
	v1 := b.runRecord(t, ids[0]).Version
	b.register(t, strings.Replace(parkedSrc, `args = {"y": 2}`, `args = {"y": 3}`, 1))
	res, err := b.migrate(MigrateParams{RunID: ids[0], To: MigrateLatest, Reason: "the fix", By: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Migrated || res.From != v1 || res.To == v1 || res.Flow != "deploy" {
		t.Fatalf("answer %+v", res)
	}
	var ev *store.Event
	for _, e := range b.timeline(t, ids[0]) {
		if e.Type == evMigrated {
			ev = e
		}
	}
	if ev == nil || ev.Detail["from"] != v1 || ev.Detail["to"] != res.To || ev.Detail["by"] != "ops" || ev.Detail["reason"] != "the fix" {
		t.Fatalf("migrated event %+v", ev)
	}
	again, err := b.migrate(MigrateParams{RunID: ids[0]})
	if err != nil || again.Migrated || again.From != res.To || again.To != res.To {
		t.Fatalf("again: %+v %v", again, err)
	}
	for i, id := range ids {
		b.approve(t, id, "hold")
		run := b.waitTerminal(t, id)
		want := map[int]string{0: `{"y":3}`, 1: `{"y":2}`}[i] // the other stays pinned
		if run.Phase != store.PhaseCompleted || string(run.Output) != want {
			t.Errorf("run %d: %s %s %+v, want %s", i, run.Phase, run.Output, run.Error, want)
		}
	}
}

// A migration is refused, changing nothing, for a run that does not fit
// the latest version (E_INCOMPATIBLE naming the misfit), one that is not
// parked (E_NOT_WAITING), another owner's (E_NOT_FOUND), and a version
// other than latest (E_BAD_REQUEST).
func TestUnitMigrateRefusals(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, parkedSrc)
	id := b.parkedRuns(t, 1)[0]
	before := b.runRecord(t, id)
	if ws := b.registerWarnings(t, strings.ReplaceAll(parkedSrc, `"hold"`, `"review"`)); len(ws) != 1 {
		t.Fatalf("warnings %s", ws)
	}
	for _, tc := range []struct {
		name string
		p    MigrateParams
		code string
		msg  string
	}{
		{"incompatible", MigrateParams{RunID: id}, CodeIncompatible, "hold: the run is parked at hold, which the new version does not have"},
		{"another owner", MigrateParams{RunID: id, Owner: "mallory"}, CodeNotFound, "no run " + id},
		{"another version", MigrateParams{RunID: id, To: "v1"}, CodeBadRequest, `a run migrates to "latest"`},
		{"no such run", MigrateParams{RunID: "run_nope"}, CodeNotFound, "no run run_nope"},
	} {
		_, err := b.migrate(tc.p)
		if ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s %q", tc.name, err, tc.code, tc.msg)
		}
	}
	if after := b.runRecord(t, id); after.Version != before.Version || after.Phase != store.PhaseWaiting {
		t.Fatalf("refusals changed the run: %s on %s", after.Phase, after.Version)
	}
	// A run that ended is not parked.
	b.register(t, parkedSrc)
	b.approve(t, id, "hold")
	b.waitTerminal(t, id)
	if _, err := b.migrate(MigrateParams{RunID: id}); ErrorCode(err) != CodeNotWaiting || !strings.Contains(err.Error(), "only a parked run") {
		t.Fatalf("an ended run: %v", err)
	}
	if evs := b.events(t, id); strings.Contains(strings.Join(evs, " "), evMigrated) {
		t.Fatalf("timeline %v", evs)
	}
}

// timeline is run id's events.
func (b *testBundle) timeline(t *testing.T, id string) []*store.Event {
	t.Helper()
	var evs []*store.Event
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: id})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

const answeredSrc = `flow(name = "answered", nodes = [
    agent("a", model = "small", prompt = "Give a number", max_turns = 2, next = "hold",
          output = {"type": "object", "required": ["n"], "properties": {"n": SCHEMA}}),
    wait("hold", timeout = "1h"),
])`

// A narrowed output_schema of an agent whose answer a parked run keeps:
// registration warns of it (the answer was checked against another
// schema), and a migration checks the run's own answer against the new
// one, refusing it when the answer does not satisfy it and moving the run
// when it does.
func TestUnitMigrateChecksTheKeptAnswer(t *testing.T) {
	t.Parallel()
	m := newFakeModel(answer(`{"n": 3}`, use(1, 1)))
	b := setupAgentConfig(t, Config{Store: memstore.New(), Tools: m, Clock: clock.NewFake(time.Now())}, m)
	ctx := context.Background()
	register := func(schema string) flows.Diagnostics {
		t.Helper()
		res, err := b.eng.Register(ctx, []SourceFile{{Path: "answered.star", Src: strings.Replace(answeredSrc, "SCHEMA", schema, 1)}})
		if err != nil || len(res.Diagnostics.Errors()) > 0 {
			t.Fatalf("register: %v %s", err, res.Diagnostics)
		}
		return res.Diagnostics
	}
	register(`{"type": "integer"}`)
	id := b.submit(t, "answered", `{}`)
	testutil.Eventually(t, waitTimeout, func() error {
		if r, err := b.eng.Get(ctx, "alice", id); err != nil || r.Phase != store.PhaseWaiting {
			return fmt.Errorf("run %s: %v %v", id, r, err)
		}
		return nil
	})
	migrate := func() (*MigrateResult, error) {
		return b.eng.Ops().Migrate(ctx, MigrateParams{Owner: "alice", RunID: id})
	}
	ds := register(`{"type": "integer", "maximum": 2}`)
	if len(ds) != 1 || !strings.Contains(ds[0].Message, "a: its answer was checked against another output_schema") {
		t.Fatalf("registration's warnings %s", ds)
	}
	if _, err := migrate(); ErrorCode(err) != CodeIncompatible || !strings.Contains(err.Error(), "a: its answer does not satisfy the new version's output_schema") {
		t.Fatalf("an answer outside the new schema: %v", err)
	}
	register(`{"type": "integer", "maximum": 5}`)
	res, err := migrate()
	if err != nil || !res.Migrated {
		t.Fatalf("an answer inside the new schema: %+v %v", res, err)
	}
}

// Two migrations of one run checked at once (two daemons of a fleet):
// the one that commits second finds the run on the version it was moving
// it to and leaves it so, without an error or a second migrated event.
func TestUnitMigrateTwiceAtOnce(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, parkedSrc)
	id := b.parkedRuns(t, 1)[0]
	b.register(t, strings.Replace(parkedSrc, `args = {"y": 2}`, `args = {"y": 3}`, 1))
	ctx := context.Background()
	p := MigrateParams{Owner: "alice", RunID: id, To: MigrateLatest, By: "alice"}
	var second migrateTarget
	if err := b.st.View(ctx, func(tx store.Tx) error {
		var err error
		second, _, _, err = migrateTargetTx(tx, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.migrate(p); err != nil || !res.Migrated {
		t.Fatalf("the first: %+v %v", res, err)
	}
	var moved bool
	var refusal *Error
	if err := b.st.Update(ctx, func(tx store.Tx) error {
		var err error
		moved, refusal, err = migrateTx(tx, p, second, b.clock.Now())
		return err
	}); err != nil || moved || refusal != nil {
		t.Fatalf("the second: moved %v, %v, %v", moved, refusal, err)
	}
	n := 0
	for _, e := range b.timeline(t, id) {
		if e.Type == evMigrated {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d migrated events, want 1", n)
	}
}
