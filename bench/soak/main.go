// Command soak kills weir anywhere and checks every invariant. It runs a
// real `weir serve` under a mixed, randomized workload (idempotent and
// non-idempotent tools, retries, budgets, cancels, duplicate submissions
// with the same request id, some with another input), SIGKILLs it at
// random moments and at every failpoint in turn, restarts it, and at the
// end holds the store's runs and timelines against the client's own record
// and the plugins' records of their side effects. It prints one line per
// invariant and "N passed, N failed", exits 1 on any violation, and then
// keeps the data directory and names the seed that reproduces the run.
//
//	go run ./bench/soak -duration 2m
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
	keep := fs.Bool("keep", false, "keep the data directory even when every invariant holds")
	if err := fs.Parse(args); err != nil {
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
		return 1
	case rep.Failed > 0:
		fmt.Fprintf(stderr, "soak: reproduce with: go run ./bench/soak -seed %d -duration %v\nsoak: data kept in %s\n", cfg.Seed, cfg.Duration, root)
		return 1
	}
	if *keep {
		fmt.Fprintf(stderr, "soak: data kept in %s\n", root)
	} else {
		os.RemoveAll(root)
	}
	return 0
}
