// Command soak kills weir anywhere and checks every invariant. It runs a
// real `weir serve` under a mixed, randomized workload (idempotent and
// non-idempotent tools, retries, budgets, cancels, duplicate submissions
// with the same request id, some with another input, agents whose proposed
// calls a person approves, edits, answers or rejects, agents whose budget
// asks for more and is raised), SIGKILLs it at
// random moments and at every failpoint in turn, restarts it, and at the
// end holds the store's runs and timelines against the client's own record
// and the plugins' records of their side effects. It prints one line per
// invariant and "N passed, N failed", exits 1 on any violation, and then
// keeps the data directory and names the seed that reproduces the run.
//
// With -fleet N it runs N daemons sharing a fresh schema of one PostgreSQL
// database instead, killing and restarting each on its own, and checks
// the fleet's promises too (fleet.go).
//
//	go run ./bench/soak -duration 2m
//	go run ./bench/soak -duration 2m -fleet 3 -store postgres://root@127.0.0.1:5432/test?sslmode=disable
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/testutil/pgtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 2*time.Minute, "how long to kill and restart the daemon before checking")
	drainFor := fs.Duration("drain", time.Minute, "the least time the last daemon may take to finish every run (the bound grows with the backlog)")
	perRun := fs.Duration("per-run", 25*time.Millisecond, "how much the drain's bound grows for each unfinished run it finds")
	quiet := fs.Duration("quiet", 20*time.Second, "end the drain when nothing moved for this long; what is unfinished then is stuck")
	results := fs.String("results", "", "write this soak's row into the soak section of this file (bench/RESULTS.md)")
	seed := fs.Uint64("seed", 0, "seed of every random choice (0: from the clock); a failing soak prints its seed")
	weir := fs.String("weir", "bin/weir", "the weir binary")
	plugins := fs.String("plugins", "bin/plugins", "the pinned plugins directory (testkit, mail, notes)")
	dir := fs.String("dir", "", "where to make the data directory (default: the system's temporary directory)")
	keep := fs.Bool("keep", false, "keep the data directory (and a fleet's schema) even when every invariant holds")
	fleet := fs.Int("fleet", 0, "run this many daemons (2 or more) sharing one PostgreSQL schema instead of one daemon on Badger")
	storeURL := fs.String("store", "", "the PostgreSQL database of a fleet, where the soak makes a fresh schema (default $"+EnvStore+" or "+pgtest.DefaultURL+")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	storeSet := false
	fs.Visit(func(f *flag.Flag) { storeSet = storeSet || f.Name == "store" })
	if err := checkFleet(*fleet, soakStore(*storeURL), storeSet); err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	cfg := Config{Duration: *duration, Drain: *drainFor, PerRun: *perRun, Quiet: *quiet, Seed: *seed, Log: stderr, Out: stdout}
	var err error
	if cfg.Weir, err = filepath.Abs(*weir); err == nil {
		cfg.Plugins, err = filepath.Abs(*plugins)
	}
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	root, err := dataDir(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	cfg.Data = filepath.Join(root, "data")
	var sch *schema
	if *fleet > 0 {
		if sch, err = newSchema(ctx, soakStore(*storeURL)); err != nil {
			fmt.Fprintln(stderr, "soak:", err)
			os.RemoveAll(root)
			return 1
		}
		cfg.Fleet, cfg.Store = *fleet, sch.URL
	}
	rep, err := Run(ctx, cfg)
	if err == nil && *results != "" {
		if werr := writeResults(*results, resultRow(cfg, rep)); werr != nil {
			fmt.Fprintln(stderr, "soak:", werr)
			return 1
		}
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "soak: %v\nsoak: seed %d; data kept in %s\n", err, cfg.Seed, root)
		keptSchema(stderr, sch)
		return 1
	case rep.Failed > 0:
		fmt.Fprintf(stderr, "soak: reproduce with: go run ./bench/soak -seed %d -duration %v%s\nsoak: data kept in %s\n", cfg.Seed, cfg.Duration, fleetArgs(*fleet), root)
		keptSchema(stderr, sch)
		return 1
	}
	if *keep {
		fmt.Fprintf(stderr, "soak: data kept in %s\n", root)
		keptSchema(stderr, sch)
		return 0
	}
	os.RemoveAll(root)
	if sch != nil {
		if err := sch.Drop(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(stderr, "soak:", err)
			return 1
		}
	}
	return 0
}

// keptSchema names a fleet's schema kept with its data directory, for
// looking into the store as the daemons left it.
func keptSchema(w io.Writer, s *schema) {
	if s != nil {
		fmt.Fprintf(w, "soak: schema %s kept (DROP SCHEMA %s CASCADE removes it)\n", s.name, s.name)
	}
}

func fleetArgs(fleet int) string {
	if fleet == 0 {
		return ""
	}
	return fmt.Sprintf(" -fleet %d", fleet)
}
