package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/bench/internal/daemon"
)

// The fleet scenario's sizes.
const (
	fleetMaxDaemons = 3
	pgbenchFor      = 5 * time.Second
	pgConnect       = 10 * time.Second
	fleetStop       = time.Minute // a daemon's drain and exit at the end of a load
)

// fleetSteps is scenario 11: the step load of scenario 3 on 1, 2 and 3
// daemons sharing one PostgreSQL database (docs/design.md §10), each load on
// a fresh schema dropped after it. Beside it: pgbench's single-client TPS on
// the same database (one commit of one row: a commit's round trip and WAL
// flush, the limit of one client) scaled to the commits a step costs; the
// Badger figure; and the CPU each part used, which shows where a 2-core
// machine saturates. The loads run in a database of their own, created and
// dropped by the scenario, so that its commit counter and backends are the
// loads' alone.
func fleetSteps(b *bench) ([]row, error) {
	pgbench, err := findPgbench()
	if err != nil {
		return skipFleet(b, err), nil
	}
	db, err := createBenchDB(b.ctx, b.postgres)
	if err != nil {
		var skip *fleetSkip
		if errors.As(err, &skip) {
			return skipFleet(b, err), nil
		}
		return nil, err
	}
	defer db.drop()

	tps, err := db.pgbench(b, pgbench)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "  pgbench: %.0f TPS\n", tps)
	badgerRun, err := b.badgerSteps()
	if err != nil {
		return nil, err
	}
	badger := badgerRun.steps

	var runs []fleetRun
	for n := 1; n <= fleetMaxDaemons; n++ {
		r, err := db.fleetLoad(b, n)
		if err != nil {
			return nil, fmt.Errorf("%d daemon(s): %w", n, err)
		}
		runs = append(runs, r)
	}

	one := runs[0]
	limit := tps / one.commitsPerStep()
	rows := []row{{
		figure: fmt.Sprintf("pgbench, 1 client, one-row UPDATE per transaction, %v", pgbenchFor),
		value:  perSec(tps),
	}}
	for _, r := range runs {
		fig := fmt.Sprintf("durable steps/s on PostgreSQL, %d daemon(s) --shared, load of row 3 (per step: %.3f commits, %.3f transactions rolled back: reads and reruns; %.3f groups rerun after a conflict, %.3f tasks claimed)",
			r.daemons, r.commitsPerStep(), r.rollbacksPerStep(), r.perStep(r.store.conflicts), r.perStep(r.store.claimed))
		if r.daemons == 1 {
			rows = append(rows, row{figure: fig, value: perSec(r.rate()),
				limit: fmt.Sprintf("pgbench %s ÷ %.3f commits/step = %s", perSec(tps), r.commitsPerStep(), perSec(limit)),
				ratio: ratio(r.rate() / limit), target: verdict("≥ 0.5x", r.rate()/limit >= 0.5)})
			// A daemon's writes all go through its one group-commit
			// session, whose statements run one after another: beside
			// one client's transactions, which do the same.
			rows = append(rows, row{figure: "same, beside one session's round trips (pgbench's single client, unscaled)", value: perSec(r.rate()),
				limit: "pgbench " + perSec(tps), ratio: ratio(r.rate() / tps)})
			continue
		}
		rows = append(rows, row{figure: fig, value: perSec(r.rate()), limit: "1 daemon " + perSec(one.rate()), ratio: ratio(r.rate() / one.rate())})
	}
	rows = append(rows, row{figure: "durable steps/s on Badger, 1 daemon (row 3's measurement)", value: perSec(badger.rate()),
		limit: "PostgreSQL, 1 daemon " + perSec(one.rate()), ratio: ratio(badger.rate() / one.rate())})
	for _, r := range runs {
		rows = append(rows, cpuRow(fmt.Sprintf("CPU per step, PostgreSQL, %d daemon(s)", r.daemons), r.stepsResult))
	}
	rows = append(rows, cpuRow("CPU per step, Badger, 1 daemon", badger))
	return rows, nil
}

// cpuRow is one load's CPU split: each part's CPU time per step, and their
// sum beside what the whole machine used in the same time. The last part is
// always the machine (machinePart).
func cpuRow(figure string, r stepsResult) row {
	steps := float64(r.steps)
	per := func(d time.Duration) string { return dur(time.Duration(float64(d) / steps)) }
	var split []string
	var ours time.Duration
	last := len(r.cpu) - 1
	for i, name := range r.parts[:last] {
		split = append(split, name+" "+per(r.cpu[i]))
		ours += r.cpu[i]
	}
	machine := r.cpu[last]
	cores := func(d time.Duration) string { return fmt.Sprintf("%.2f cores", d.Seconds()/r.elapsed.Seconds()) }
	return row{
		figure: figure + ": " + strings.Join(split, ", "),
		value:  per(ours) + " (" + cores(ours) + ")",
		limit:  fmt.Sprintf("machine busy %s of %d", cores(machine), runtime.NumCPU()),
		ratio:  ratio(ours.Seconds() / machine.Seconds()),
	}
}

// fleetRun is one load on n daemons.
type fleetRun struct {
	stepsResult
	daemons int
	xacts   xacts // of the bench database over the load: the daemons' alone
	store   storeCounts
}

func (r fleetRun) commitsPerStep() float64 {
	return float64(r.xacts.commits) / float64(r.steps)
}

func (r fleetRun) perStep(n int64) float64 { return float64(n) / float64(r.steps) }

func (r fleetRun) rollbacksPerStep() float64 {
	return float64(r.xacts.rollbacks) / float64(r.steps)
}

// fleetSkip says why the scenario cannot run here: it is skipped, not failed.
type fleetSkip struct{ err error }

func (e *fleetSkip) Error() string { return e.err.Error() }

func skipFleet(b *bench, why error) []row {
	fmt.Fprintf(b.log, "  skipped: %v\n", why)
	return []row{{figure: "fleet on PostgreSQL", value: "skipped: " + firstLine(why.Error())}}
}

// findPgbench finds pgbench on the PATH or in Debian's versioned
// PostgreSQL directories, the newest first.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	slices.SortFunc(found, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	if len(found) == 0 {
		return "", errors.New("pgbench, the limit the rows are judged against, is not installed (it ships with PostgreSQL's client package)")
	}
	return found[0], nil
}

func pgVersion(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// benchDB is a database of the scenario's own on the server of the
// configured URL.
type benchDB struct {
	ctx   context.Context
	base  *url.URL // the configured URL
	name  string
	admin *pgx.Conn // on the configured database: creates and drops ours
	mon   *pgx.Conn // on ours: schemas, statistics, backends
}

func createBenchDB(ctx context.Context, raw string) (*benchDB, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, pgConnect)
	defer cancel()
	admin, err := pgx.Connect(cctx, raw)
	if err != nil {
		return nil, &fleetSkip{fmt.Errorf("PostgreSQL at %s is not reachable: %s", u.Redacted(), strings.Join(strings.Fields(err.Error()), " "))}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	db := &benchDB{ctx: ctx, base: u, name: "weir_bench_" + hex.EncodeToString(b[:]), admin: admin}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.name); err != nil {
		admin.Close(ctx)
		return nil, fmt.Errorf("creating the bench's database (the role needs CREATEDB): %w", err)
	}
	if db.mon, err = pgx.Connect(cctx, db.url("")); err != nil {
		db.drop()
		return nil, err
	}
	// The server's CPU is read from /proc: its processes must be ours to see.
	var pid int32
	if err := db.mon.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		db.drop()
		return nil, err
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		db.drop()
		return nil, &fleetSkip{fmt.Errorf("PostgreSQL at %s does not run on this machine (its session's process %d is not here), so its CPU cannot be read", u.Redacted(), pid)}
	}
	return db, nil
}

// url is our database's URL, with search_path set to schema if not "".
func (db *benchDB) url(schema string) string {
	u := *db.base
	u.Path = "/" + db.name
	q := u.Query()
	q.Del("search_path")
	if schema != "" {
		q.Set("search_path", schema)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (db *benchDB) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if db.mon != nil {
		db.mon.Close(ctx)
	}
	if _, err := db.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: dropping database %s: %v\n", db.name, err)
	}
	db.admin.Close(ctx)
}

// schema creates a fresh schema; the function returned drops it.
func (db *benchDB) schema(name string) (func(), error) {
	if _, err := db.mon.Exec(db.ctx, "CREATE SCHEMA "+name); err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := db.mon.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: dropping schema %s: %v\n", name, err)
		}
	}, nil
}

// pgbench runs pgbench with one client for pgbenchFor on a one-row table of
// a schema of its own, and returns its transactions per second.
func (db *benchDB) pgbench(b *bench, path string) (float64, error) {
	const schema = "bench_pgbench"
	drop, err := db.schema(schema)
	if err != nil {
		return 0, err
	}
	defer drop()
	if _, err := db.mon.Exec(b.ctx, "CREATE TABLE "+schema+".one (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO "+schema+".one VALUES (1, 0)"); err != nil {
		return 0, err
	}
	dir, err := b.dir("pgbench")
	if err != nil {
		return 0, err
	}
	script := filepath.Join(dir, "one-row.sql")
	if err := os.WriteFile(script, []byte("UPDATE "+schema+".one SET n = n + 1 WHERE id = 1;\n"), 0o644); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(b.ctx, path, "-n", "-c", "1", "-T", strconv.Itoa(int(pgbenchFor.Seconds())), "-f", script, db.url(""))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %w\n%s", path, err, out)
	}
	m := regexp.MustCompile(`(?m)^tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s printed no tps line:\n%s", path, out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// fleetLoad runs the step load on n daemons sharing a fresh schema.
func (db *benchDB) fleetLoad(b *bench, n int) (fleetRun, error) {
	schema := fmt.Sprintf("bench_fleet%d", n)
	drop, err := db.schema(schema)
	if err != nil {
		return fleetRun{}, err
	}
	defer drop()
	ds := make([]*daemon.Daemon, 0, n)
	defer func() {
		for _, d := range ds {
			_ = d.Kill()
		}
	}()
	for i := range n {
		d, err := b.startDaemon(fmt.Sprintf("fleet%d-%d", n, i), "--store", db.url(schema), "--shared",
			"--log-level", "info") // the store's closing line says what it counted
		if err != nil {
			return fleetRun{}, err
		}
		ds = append(ds, d)
	}
	if err := b.stepsWarmUp(ds); err != nil {
		return fleetRun{}, err
	}
	before, err := db.xacts()
	if err != nil {
		return fleetRun{}, err
	}
	res, err := b.steps(ds, append(daemonParts(ds), db.backends(), db.background(), selfPart(), machinePart())...)
	if err != nil {
		return fleetRun{}, err
	}
	// A backend sends its statistics at most once a second, and an idle
	// one up to ten seconds later; one that ends sends them at once. So
	// the daemons stop, and the count is read when their sessions are gone.
	var st storeCounts
	for _, d := range ds {
		if err := d.Stop(fleetStop); err != nil {
			return fleetRun{}, err
		}
		st.add(d.Log())
	}
	if err := db.waitNoSessions(time.Minute); err != nil {
		return fleetRun{}, err
	}
	after, err := db.xacts()
	if err != nil {
		return fleetRun{}, err
	}
	return fleetRun{stepsResult: res, daemons: n, xacts: xacts{after.commits - before.commits, after.rollbacks - before.rollbacks}, store: st}, nil
}

// storeCounts is what the daemons' stores counted over their lives (the
// warm-up's few runs included), from the line each logs as it closes.
type storeCounts struct{ conflicts, claimed int64 }

// storeCount finds one count of the store's closing line, in hclog's text
// (key=value) or JSON ("key":value) form.
func storeCount(line, key string) int64 {
	m := regexp.MustCompile(`\b` + key + `"?[=:](\d+)`).FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// add adds what one daemon's log says its store counted.
func (c *storeCounts) add(log string) {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "store closed") {
			c.conflicts += storeCount(line, "conflicts")
			c.claimed += storeCount(line, "claimed")
		}
	}
}

// xacts counts transactions: committed (pgstore's writes, each a group of
// Updates) and rolled back (pgstore ends every View, its reads, with a
// ROLLBACK; and a group that failed serialization is rolled back and run
// again).
type xacts struct{ commits, rollbacks int64 }

// xacts is our database's count of transactions so far.
func (db *benchDB) xacts() (xacts, error) {
	var x xacts
	err := db.mon.QueryRow(db.ctx, "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&x.commits, &x.rollbacks)
	return x, err
}

// waitNoSessions waits until no session but ours is connected to our
// database.
func (db *benchDB) waitNoSessions(bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		var n int
		if err := db.mon.QueryRow(db.ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sessions still on %s %v after the daemons stopped", n, db.name, bound)
		}
		if err := pause(db.ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// backends charges a load the PostgreSQL sessions of our database (the
// daemons' pools, lock and listening connections), ours excepted.
func (db *benchDB) backends() cpuPart {
	return db.serverPart("PostgreSQL sessions", "backend_type = 'client backend' AND datname = current_database() AND pid <> pg_backend_pid()")
}

// background charges a load the server's own processes: the WAL writer,
// the checkpointer, the background writer, autovacuum. They serve every
// database of the server, so other users' work is in this figure too.
func (db *benchDB) background() cpuPart {
	return db.serverPart("PostgreSQL background", "backend_type <> 'client backend' AND (datname IS NULL OR datname = current_database())")
}

// serverPart sums the CPU of the server processes the condition selects.
// Each process's last reading is kept, so one that ends during the load
// still counts what it used until it was last seen.
func (db *benchDB) serverPart(name, where string) cpuPart {
	seen := map[int]time.Duration{}
	return cpuPart{name, func() (time.Duration, error) {
		rows, err := db.mon.Query(db.ctx, "SELECT pid FROM pg_stat_activity WHERE "+where)
		if err != nil {
			return 0, err
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return 0, err
		}
		for _, pid := range pids {
			p, err := readProc(int(pid))
			if err != nil {
				return 0, err
			}
			if !p.found {
				continue
			}
			seen[int(pid)] = p.self
		}
		var sum time.Duration
		for _, v := range seen {
			sum += v
		}
		return sum, nil
	}}
}
