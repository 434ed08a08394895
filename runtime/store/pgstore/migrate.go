package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The schema's versions are SQL files named NNNN_what.sql, applied in
// order, each once, in one transaction with the row that records it.
//
// Rolling upgrades: each file's first line declares its compatibility,
// "-- compat: expand" (a weir that knows only the versions before it keeps
// running on the schema: new tables, nullable or defaulted columns, new
// indexes) or "-- compat: contract" (an older weir must not run on it:
// dropped or renamed columns, new NOT NULL columns it would not fill).
// The schema records each version's compatibility; the oldest weir able to
// run on it knows the latest contract version. So a change that breaks the
// previous release ships in two: the expand first, the contract (removing
// what the previous release needed) one release later (docs/releasing.md).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one version of the schema.
type migration struct {
	version int
	name    string
	sql     string
	// contract: a weir that does not know this version must not run on a
	// schema that has it.
	contract bool
}

// declaredFrom is the first version that must declare its compatibility;
// the versions before it predate the rule and are contracts.
const declaredFrom = 3

// ErrSchemaNewer: the database's schema was made by a newer weir than this
// one. Opening it could misread or damage what the newer release wrote, so
// it is refused until weir is upgraded.
var ErrSchemaNewer = errors.New("pgstore: the database's schema is newer than this weir")

// migrationLock is the first key of the advisory lock taken while the
// schema is checked and migrated; the second is the schema's name, so
// stores in other schemas of one database do not wait for each other.
const migrationLock = 0x77656972 // "weir"

// storeLock is the first key of the advisory lock an unshared store holds
// on its schema for its life.
const storeLock = migrationLock + 1

// eventLock is the first key of the transaction advisory lock an event
// append takes on its run (the second is a hash of the schema and the run
// id) before it draws its number, so that the events of one run commit in
// the order of their numbers even with several writers.
const eventLock = migrationLock + 2

// schemaMigrationsDDL makes the table that records the versions applied,
// and their compatibility (contract: the versions recorded before the
// column existed were all contracts, and a weir that predates it records
// only those).
const schemaMigrationsDDL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version integer PRIMARY KEY,
	name text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now());
ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS contract boolean NOT NULL DEFAULT true`

// migrations returns the embedded migrations in version order. Versions
// start at 1 and have no gaps.
func migrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range ents {
		num, rest, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(rest, ".sql") {
			return nil, fmt.Errorf("pgstore: migration file %s is not named NNNN_what.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		m := migration{version: v, name: strings.TrimSuffix(rest, ".sql"), sql: string(b), contract: true}
		first, _, _ := strings.Cut(m.sql, "\n")
		switch strings.TrimSpace(first) {
		case "-- compat: expand":
			m.contract = false
		case "-- compat: contract":
		default:
			if v >= declaredFrom {
				return nil, fmt.Errorf("pgstore: migration file %s does not begin with -- compat: expand or -- compat: contract", e.Name())
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migration %d (%s) follows %d: versions must count from 1 without gaps", m.version, m.name, i)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema version this weir knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings the schema of conn's current schema up to date with ms
// (the embedded migrations, or the first of them where a test plays an
// older weir), under an advisory lock held until its transaction ends: of
// several daemons starting at once on one database, one migrates and the
// others find the schema current. A schema newer than ms is used as it is
// if every version past ms is an expand, and refused otherwise
// (ErrSchemaNewer). It returns the versions it applied, and the schema's
// version when that is newer than ms (else 0).
func migrate(ctx context.Context, conn *pgx.Conn, ms []migration) (applied []int, newer int, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	var schema *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, 0, err
	}
	if schema == nil {
		return nil, 0, errors.New("pgstore: no schema of the search path exists: create it, or set search_path in the store URL to one that does")
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, int32(migrationLock)); err != nil {
		return nil, 0, fmt.Errorf("pgstore: taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, schemaMigrationsDDL); err != nil {
		return nil, 0, fmt.Errorf("pgstore: creating schema_migrations in %s: %w", *schema, err)
	}
	var cur, oldest int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0), coalesce(max(version) FILTER (WHERE contract), 0)
		FROM schema_migrations`).Scan(&cur, &oldest); err != nil {
		return nil, 0, err
	}
	known := len(ms)
	if cur > known {
		if oldest > known {
			return nil, 0, fmt.Errorf("%w: schema %q is at version %d, which needs a weir that knows version %d or later, and this weir knows versions up to %d: run a weir at least as new as the one that migrated it",
				ErrSchemaNewer, *schema, cur, oldest, known)
		}
		// Expanded by a newer weir in a way this one still runs on.
		return nil, cur, tx.Commit(ctx)
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return nil, 0, fmt.Errorf("pgstore: migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, contract) VALUES ($1, $2, $3)`, m.version, m.name, m.contract); err != nil {
			return nil, 0, err
		}
		applied = append(applied, m.version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, fmt.Errorf("pgstore: committing the schema: %w", err)
	}
	return applied, 0, nil
}
