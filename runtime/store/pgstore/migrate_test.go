package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil/pgtest"
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
