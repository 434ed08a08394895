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
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one version of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

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

// schemaMigrationsDDL makes the table that records the versions applied.
const schemaMigrationsDDL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version integer PRIMARY KEY,
	name text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now())`

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
		out = append(out, migration{version: v, name: strings.TrimSuffix(rest, ".sql"), sql: string(b)})
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

// migrate brings the schema of conn's current schema up to date, under an
// advisory lock held until its transaction ends: of several daemons
// starting at once on one database, one migrates and the others find the
// schema current. A schema newer than this weir is refused
// (ErrSchemaNewer). It returns the versions it applied.
func migrate(ctx context.Context, conn *pgx.Conn) (applied []int, err error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	var schema *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, err
	}
	if schema == nil {
		return nil, errors.New("pgstore: no schema of the search path exists: create it, or set search_path in the store URL to one that does")
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, int32(migrationLock)); err != nil {
		return nil, fmt.Errorf("pgstore: taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, schemaMigrationsDDL); err != nil {
		return nil, fmt.Errorf("pgstore: creating schema_migrations in %s: %w", *schema, err)
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return nil, err
	}
	known := len(ms)
	if cur > known {
		return nil, fmt.Errorf("%w: schema %q is at version %d and this weir knows versions up to %d: run a weir at least as new as the one that migrated it",
			ErrSchemaNewer, *schema, cur, known)
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("pgstore: migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return nil, err
		}
		applied = append(applied, m.version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: committing the schema: %w", err)
	}
	return applied, nil
}
