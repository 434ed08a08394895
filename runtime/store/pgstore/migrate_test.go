package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

func TestMigrationsAreNumberedFromOne(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || SchemaVersion() != len(ms) {
		t.Fatalf("%d migrations, SchemaVersion %d", len(ms), SchemaVersion())
	}
}

// schemaVersions reads the versions recorded in a schema.
func schemaVersions(t *testing.T, u string) []int {
	t.Helper()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestOpensRacingMigrateOnce opens several stores at once on an empty
// schema, as daemons started together would: every open succeeds (none
// trips over another's half-made tables) and each migration is applied
// once.
func TestOpensRacingMigrateOnce(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(context.Background(), u, Options{Shared: true})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		stores[i].Close()
	}
	want := fmt.Sprint(func() []int {
		var vs []int
		for v := 1; v <= SchemaVersion(); v++ {
			vs = append(vs, v)
		}
		return vs
	}())
	if got := fmt.Sprint(schemaVersions(t, u)); got != want {
		t.Fatalf("schema_migrations holds %s, want each version once: %s", got, want)
	}
}

// TestNewerSchemaRefused: a schema migrated by a newer weir is refused at
// open with an error that names both versions, and nothing is changed.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	s, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	newer := SchemaVersion() + 1
	pgtest.Exec(t, u, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_the_future')`, newer)
	_, err = Open(ctx, u, Options{})
	if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", newer)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("up to %d", SchemaVersion())) {
		t.Fatalf("open of a newer schema: %v, want ErrSchemaNewer naming versions %d and %d", err, newer, SchemaVersion())
	}
	if got := len(schemaVersions(t, u)); got != newer {
		t.Fatalf("%d versions recorded after the refusal, want %d", got, newer)
	}
}

// TestOpenErrorsHideThePassword: whatever fails at open, the password of
// the URL is not in the error.
func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	for _, u := range []string{
		"postgres://weir:s3cret-pw@127.0.0.1:1/weir?sslmode=disable&connect_timeout=5", // nothing listens on port 1
		"postgres://weir:s3cret-pw@127.0.0.1:5432/weir?sslmode=bogus",
		"postgres://weir@127.0.0.1:1/weir?password=s3cret-pw&sslmode=disable&connect_timeout=5",
	} {
		_, err := Open(ctx, u, Options{})
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Fatalf("Open(%s): %v, want an error without the password", storeurl.Redact(u), err)
		}
	}
}

// TestNoSchema: a search_path naming no existing schema is refused with
// an error that says so.
func TestNoSchema(t *testing.T) {
	t.Parallel()
	base := pgtest.Require(t)
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	_, err := Open(ctx, base+sep+"search_path=weir_no_such_schema", Options{})
	if err == nil || !strings.Contains(err.Error(), "search_path") {
		t.Fatalf("open with a missing schema: %v", err)
	}
}

// TestSynchronousCommitOffRefused: a session that would acknowledge a
// COMMIT before it is durable is refused at open.
func TestSynchronousCommitOffRefused(t *testing.T) {
	t.Parallel()
	_, err := Open(ctx, pgtest.Schema(t)+"&synchronous_commit=off", Options{})
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("open with synchronous_commit off: %v, want ErrNotDurable", err)
	}
}

// TestVersion1DataOpens loads records written by a store of schema
// version 1 (testdata/v1-data.sql) into a schema of that version, opens
// it (applying every later migration) and reads them back: an upgrade
// keeps the previous release's records and resumes its parked runs.
func TestVersion1DataOpens(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("testdata/v1-data.sql")
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, u, schemaMigrationsDDL+";\n"+ms[0].sql+"\n"+string(fixture))
	s, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 5, time.UTC)
	err = s.View(ctx, func(tx store.Tx) error {
		r, e1 := tx.RunGet("run_1")
		parked, e2 := tx.TaskListReady(t0.Add(time.Hour), 0)
		c, e3 := tx.ContinuationGet("run_1")
		evs, e4 := tx.EventList(store.EventListParams{RunID: "run_1"})
		d, e5 := tx.DedupGet("alice", "req-1")
		idem, e6 := tx.IdemListRun("run_1")
		fv, e7 := tx.FlowVersionLatest("gate")
		if err := errors.Join(e1, e2, e3, e4, e5, e6, e7); err != nil {
			return err
		}
		switch {
		case r.Phase != store.PhaseWaiting || r.Owner != "alice" || string(r.Input) != `{"n":1}`:
			return fmt.Errorf("run %+v", r)
		case len(parked) != 1 || parked[0].ID != "task_1" || !parked[0].ReadyAt.Equal(t0.Add(time.Hour)):
			return fmt.Errorf("parked tasks %+v", parked)
		case string(c) != "\x01continuation":
			return fmt.Errorf("continuation %q", c)
		case len(evs) != 2 || evs[0].Seq != 1 || evs[1].Type != "waiting" || !evs[1].At.Equal(t0):
			return fmt.Errorf("events %+v", evs)
		case d.RunID != "run_1" || len(idem) != 1 || idem[0].State != store.IdemStarted || fv.Hash != "h1":
			return fmt.Errorf("dedup %+v, idem %+v, flow %+v", d, idem, fv)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Migration 2 gave the run its creation time to the nanosecond: it is
	// listed newest first, and a page that ended at it starts after it.
	err = s.View(ctx, func(tx store.Tx) error {
		p := store.RunListParams{Owner: "alice", Order: store.OrderNewest, Flow: "gate"}
		first, err := tx.RunList(p)
		if err != nil || len(first) != 1 || first[0].ID != "run_1" {
			return fmt.Errorf("newest first: %v, %v", first, err)
		}
		p.Before = &store.RunCursor{CreatedAt: first[0].CreatedAt, ID: first[0].ID}
		next, err := tx.RunList(p)
		if err != nil || len(next) != 0 {
			return fmt.Errorf("the page after run_1 (created %s): %d runs, %v", first[0].CreatedAt.Format(time.RFC3339Nano), len(next), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Migration 9 indexed the parked run under the version its JSON
	// names, with no position.
	err = s.View(ctx, func(tx store.Tx) error {
		gs, err := tx.RunParkedGroups(store.RunParkedGroupsParams{Flow: "gate"})
		if err != nil || len(gs) != 1 || gs[0] != (store.ParkedGroup{Version: "h1", Position: "", First: "run_1"}) {
			return fmt.Errorf("parked groups %+v, %v", gs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The event sequence goes on from where the previous release left it.
	e := &store.Event{RunID: "run_1", Type: "approved"}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.EventAppend(e) }); err != nil || e.Seq != 3 {
		t.Fatalf("next event: seq %d, %v; want 3", e.Seq, err)
	}
}

// TestNewerRecordVersionRefused marks rows with a record format version
// this weir does not know, as a newer release would write, and checks the
// readers refuse them naming the record and both versions instead of
// decoding them by guess.
func TestNewerRecordVersionRefused(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	s := openURL(t, u, Options{})
	storetest.PutVersionRecords(t, s)
	pgtest.Exec(t, u, `UPDATE runs SET v = v + 1; UPDATE continuations SET v = v + 1`)
	storetest.CheckNewerRefused(t, s, errBadVersion, storetest.RunReads)
}

// TestMigrationsDeclareCompat: every migration from declaredFrom on says
// whether it is an expand or a contract; 0003 (the fleet's roll, a new
// table) is an expand.
func TestMigrationsDeclareCompat(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		first, _, _ := strings.Cut(m.sql, "\n")
		if m.version >= declaredFrom && !strings.HasPrefix(first, "-- compat: ") {
			t.Errorf("migration %d (%s) declares no compatibility", m.version, m.name)
		}
	}
	if ms[0].contract != true || ms[1].contract != true || ms[2].contract != false {
		t.Fatalf("compat of 1, 2, 3: contract %v %v %v, want true true false", ms[0].contract, ms[1].contract, ms[2].contract)
	}
}

// TestRollingUpgrade plays a rolling upgrade with the migration list cut
// short for the previous release's weir: it makes the schema at its own
// version; the current weir, opened beside it, migrates to the latest;
// the previous one keeps writing and reading, and a restart of it opens
// the expanded schema. A weir older than the latest contract (version 1,
// against 0002's NOT NULL columns) is refused with both versions named,
// and nothing is changed.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	u := pgtest.Schema(t)
	prev := SchemaVersion() - 1
	old, err := Open(ctx, u, Options{Shared: true, known: prev})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := len(schemaVersions(t, u)); got != prev {
		t.Fatalf("the previous weir made %d versions, want %d", got, prev)
	}
	cur, err := Open(ctx, u, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if got := len(schemaVersions(t, u)); got != SchemaVersion() {
		t.Fatalf("the current weir left %d versions, want %d", got, SchemaVersion())
	}
	write := func(s *Store, id string) {
		t.Helper()
		now := time.Now()
		if err := s.Update(ctx, func(tx store.Tx) error {
			if err := tx.RunInsert(&store.Run{ID: id, Flow: "f", Owner: "o", Phase: store.PhaseQueued, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			return tx.TaskPut(&store.Task{ID: id + "/t", RunID: id, Kind: store.TaskStep, ReadyAt: now, CreatedAt: now})
		}); err != nil {
			t.Fatalf("write %s: %v", id, err)
		}
	}
	write(old, "r-old")
	write(cur, "r-cur")
	old.Close()
	again, err := Open(ctx, u, Options{Shared: true, known: prev})
	if err != nil {
		t.Fatalf("the previous weir on the expanded schema: %v", err)
	}
	write(again, "r-again")
	if err := again.View(ctx, func(tx store.Tx) error {
		for _, id := range []string{"r-old", "r-cur", "r-again"} {
			if _, err := tx.RunGet(id); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	again.Close()

	_, err = Open(ctx, u, Options{Shared: true, known: 1})
	if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), fmt.Sprintf("at version %d", SchemaVersion())) ||
		!strings.Contains(err.Error(), "needs a weir that knows version 2 or later") || !strings.Contains(err.Error(), "up to 1") {
		t.Fatalf("a weir two releases behind: %v, want ErrSchemaNewer naming versions %d, 2 and 1", err, SchemaVersion())
	}
	if got := len(schemaVersions(t, u)); got != SchemaVersion() {
		t.Fatalf("%d versions after the refusal, want %d", got, SchemaVersion())
	}
}
