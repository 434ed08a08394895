// Package pgtest connects weir's tests to a real PostgreSQL: the store's
// suite, and any test that runs the daemon on the PostgreSQL store.
//
// The database is named by WEIR_TEST_POSTGRES_URL (default DefaultURL).
// Each test gets a schema of its own, created empty and dropped when the
// test ends, so tests run in parallel on one database without seeing each
// other's records. Where PostgreSQL cannot be reached the tests skip with
// the reason, unless WEIR_TEST_POSTGRES=required (as in CI), where they
// fail: a CI that silently skipped them would prove nothing.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The environment that configures the tests.
const (
	// EnvURL names the database the tests use.
	EnvURL = "WEIR_TEST_POSTGRES_URL"
	// EnvMode set to "required" makes an unreachable database a failure.
	EnvMode = "WEIR_TEST_POSTGRES"
	// DefaultURL is the database of the project's machines and CI.
	DefaultURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"
)

// connectTimeout bounds the probe: a machine without PostgreSQL answers
// at once, a firewalled address would otherwise hang the suite.
const connectTimeout = 10 * time.Second

// BaseURL is the database the tests use.
func BaseURL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

// Required reports whether the tests must fail, not skip, without
// PostgreSQL.
func Required() bool { return os.Getenv(EnvMode) == "required" }

var probe struct {
	once sync.Once
	err  error
}

// Probe connects once per process and reports why PostgreSQL cannot be
// used, or nil.
func Probe() error {
	probe.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, BaseURL())
		if err != nil {
			probe.err = fmt.Errorf("PostgreSQL at %s is not reachable: %s", redact(BaseURL()), oneLine(err))
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			probe.err = fmt.Errorf("PostgreSQL at %s does not answer: %w", redact(BaseURL()), err)
		}
	})
	return probe.err
}

// Status is the one line that says whether the PostgreSQL tests run, and
// an error when they are required and cannot.
func Status() (string, error) { return status(Probe(), Required()) }

func status(probeErr error, required bool) (string, error) {
	switch {
	case probeErr == nil:
		return fmt.Sprintf("PostgreSQL tests: running on %s", redact(BaseURL())), nil
	case required:
		return "", fmt.Errorf("PostgreSQL tests: %s=required but %w", EnvMode, probeErr)
	}
	return fmt.Sprintf("PostgreSQL tests: SKIPPED, %v (set %s to another database, or %s=required to fail instead)",
		probeErr, EnvURL, EnvMode), nil
}

// Require returns the base URL, or skips t (fails it where PostgreSQL is
// required) with the reason.
func Require(t testing.TB) string {
	t.Helper()
	if err := Probe(); err != nil {
		if Required() {
			t.Fatalf("%s=required: %v", EnvMode, err)
		}
		t.Skipf("skipped: %v", err)
	}
	return BaseURL()
}

// Schema creates an empty schema for t and returns the URL of the test
// database with search_path set to it. The schema is dropped, with
// everything in it, when t ends.
func Schema(t testing.TB) string {
	t.Helper()
	base := Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "weir_test_" + hex.EncodeToString(b[:])
	exec(t, base, "CREATE SCHEMA "+name)
	t.Cleanup(func() { exec(t, base, "DROP SCHEMA "+name+" CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// Exec runs one statement on the database of dbURL.
func Exec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	exec(t, dbURL, sql, args...)
}

func exec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", redact(dbURL), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// oneLine writes err on one line: pgx lists each address it tried on a
// line of its own, the same line twice when it retried without TLS.
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !slices.Contains(parts, l) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the configured URL)"
	}
	return u.Redacted()
}
