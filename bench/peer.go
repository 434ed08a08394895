package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/bench/internal/daemon"
)

// The peer load: peerRuns runs of the ten-step flow (each step echoing
// 100 bytes, checkpointed), submitted by peerClients clients that each
// wait for their run's end before starting the next — the same on weir
// (Badger, and PostgreSQL) and on DBOS Transact on the same PostgreSQL.
const peerRuns, peerClients = 200, 16

// peerDir is the DBOS peer's own module (bench/peers/dbos), relative to
// the repository root `make bench` runs in.
const peerDir = "bench/peers/dbos"

// dbosPeer is scenario 16: weir beside DBOS Transact (Go, v1.8.0, its
// steps in process where weir's cross a plugin), each on a fresh database
// of the same PostgreSQL, with each side's CPU per step: the processes of
// each (weir serve with its plugins; the DBOS program) and the database
// server's sessions and background processes.
func dbosPeer(b *bench) ([]row, error) {
	db, err := createBenchDB(b.ctx, b.postgres)
	if err != nil {
		var skip *fleetSkip
		if errors.As(err, &skip) {
			fmt.Fprintf(b.log, "  skipped: %v\n", err)
			return []row{{figure: "peer: DBOS Transact on PostgreSQL", value: "skipped: " + firstLine(err.Error())}}, nil
		}
		return nil, err
	}
	defer db.drop()
	bin, err := b.buildPeer()
	if err != nil {
		return nil, err
	}

	onBadger, err := b.peerWeir("peer-badger", nil)
	if err != nil {
		return nil, fmt.Errorf("weir on Badger: %w", err)
	}
	drop, err := db.schema("bench_peer")
	if err != nil {
		return nil, err
	}
	onPG, err := b.peerWeir("peer-pg", db, "--store", db.url("bench_peer"))
	drop()
	if err != nil {
		return nil, fmt.Errorf("weir on PostgreSQL: %w", err)
	}
	if err := db.waitNoSessions(time.Minute); err != nil {
		return nil, err
	}
	peer, err := b.runPeer(bin, db)
	if err != nil {
		return nil, fmt.Errorf("DBOS Transact: %w", err)
	}

	rate := stepsResult.rate
	shape := fmt.Sprintf("%d runs × %d echo steps of 100 bytes, %d clients each waiting for its run", peerRuns, stepsPerRun, peerClients)
	dbos := "DBOS Transact v1.8.0 on PostgreSQL " + perSec(rate(peer))
	return []row{
		{figure: "peer: " + shape + ", weir on Badger", value: perSec(rate(onBadger)), limit: dbos,
			ratio: ratio(rate(onBadger) / rate(peer)), target: verdict("≥ 2.0x", rate(onBadger)/rate(peer) >= 2)},
		{figure: "peer: same, weir on the same PostgreSQL (one daemon)", value: perSec(rate(onPG)), limit: dbos,
			ratio: ratio(rate(onPG) / rate(peer)), target: verdict("≥ 1.0x", rate(onPG)/rate(peer) >= 1)},
		cpuRow("CPU per step, weir on Badger", onBadger),
		cpuRow("CPU per step, weir on PostgreSQL", onPG),
		cpuRow("CPU per step, DBOS Transact on PostgreSQL", peer),
	}, nil
}

// buildPeer builds the DBOS peer outside weir's workspace (its module is
// its own), so that its build is not in what is timed.
func (b *bench) buildPeer() (string, error) {
	if _, err := os.Stat(filepath.Join(peerDir, "go.mod")); err != nil {
		return "", fmt.Errorf("the DBOS peer's module (run the bench from the repository root): %w", err)
	}
	dir, err := b.dir("peer-build")
	if err != nil {
		return "", err
	}
	bin, err := filepath.Abs(filepath.Join(dir, "dbos-peer"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(b.ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = peerDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the DBOS peer: %w\n%s", err, out)
	}
	return bin, nil
}

// peerWeir runs the peer load on one daemon started with args (its store
// on db's server when db is given, whose processes are then charged too).
func (b *bench) peerWeir(name string, db *benchDB, args ...string) (stepsResult, error) {
	d, err := b.startDaemon(name, args...)
	if err != nil {
		return stepsResult{}, err
	}
	defer d.Kill()
	ds := []*daemon.Daemon{d}
	if err := b.stepsWarmUp(ds); err != nil {
		return stepsResult{}, err
	}
	parts := daemonParts(ds)
	if db != nil {
		parts = append(parts, db.backends(), db.background())
	}
	parts = append(parts, machinePart())
	before, err := readCPU(parts)
	if err != nil {
		return stepsResult{}, err
	}
	start := time.Now()
	c := d.Client()
	if err := eachClient(peerRuns, peerClients, func() error { return runToEnd(b.ctx, c, "ten", stepInput) }); err != nil {
		return stepsResult{}, err
	}
	elapsed := time.Since(start)
	after, err := readCPU(parts)
	if err != nil {
		return stepsResult{}, err
	}
	return newStepsResult(peerRuns*stepsPerRun, elapsed, parts, before, after), d.Stop(fleetStop)
}

// runPeer runs the DBOS program on db (DBOS makes its own schema there):
// the CPU of the program and of the server is read once it is ready and
// again when it has answered.
func (b *bench) runPeer(bin string, db *benchDB) (stepsResult, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-db", db.url(""), "-runs", strconv.Itoa(peerRuns), "-steps", strconv.Itoa(stepsPerRun),
		"-clients", strconv.Itoa(peerClients))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return stepsResult{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return stepsResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return stepsResult{}, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	fail := func(err error) (stepsResult, error) {
		return stepsResult{}, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		return fail(fmt.Errorf("the peer did not say ready (%q): %v", lines.Text(), lines.Err()))
	}
	pid := cmd.Process.Pid
	parts := []cpuPart{{"DBOS Transact (steps in process)", func() (time.Duration, error) {
		p, err := readProc(pid)
		return p.self, err
	}}, db.backends(), db.background(), machinePart()}
	before, err := readCPU(parts)
	if err != nil {
		return fail(err)
	}
	if _, err := fmt.Fprintln(stdin, "go"); err != nil {
		return fail(err)
	}
	if !lines.Scan() {
		return fail(fmt.Errorf("the peer gave no result: %v", lines.Err()))
	}
	after, err := readCPU(parts)
	if err != nil {
		return fail(err)
	}
	var res struct {
		Runs, Steps int
		ElapsedNS   int64 `json:"elapsed_ns"`
	}
	if err := json.Unmarshal(lines.Bytes(), &res); err != nil || res.Runs != peerRuns || res.Steps != stepsPerRun {
		return fail(fmt.Errorf("the peer answered %q (%v)", lines.Text(), err))
	}
	return newStepsResult(res.Runs*res.Steps, time.Duration(res.ElapsedNS), parts, before, after), nil
}

// eachClient runs n calls of do over clients goroutines, each call after
// the previous one of its goroutine, and returns the first error.
func eachClient(n, clients int, do func() error) error {
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < n; i += clients {
				if err := do(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
