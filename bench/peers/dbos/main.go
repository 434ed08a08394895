// Command dbos is the bench's peer: DBOS Transact (Go) running the load of
// weir's peer row on the same PostgreSQL — RUNS workflows of STEPS
// sequential steps, each echoing a 100-byte payload and checkpointed by
// DBOS, submitted by CLIENTS goroutines that each wait for their
// workflow's result before starting the next. It is its own module, so
// weir's never depends on it. Once launched and warmed up it prints
// "ready" and waits for a line on stdin, so that the bench reads every
// process's CPU (this one's and the database server's) around the timed
// section alone; then it prints one JSON line with that section's wall
// time.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// result is what the bench reads.
type result struct {
	Runs      int   `json:"runs"`
	Steps     int   `json:"steps"`
	ElapsedNS int64 `json:"elapsed_ns"`
}

func main() {
	db := flag.String("db", "", "PostgreSQL URL of a fresh database for DBOS's system tables")
	runs := flag.Int("runs", 200, "workflows in the timed section")
	steps := flag.Int("steps", 10, "steps per workflow")
	clients := flag.Int("clients", 16, "concurrent clients, each waiting for its workflow")
	flag.Parse()
	if err := run(*db, *runs, *steps, *clients, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dbos peer:", err)
		os.Exit(1)
	}
}

func run(db string, runs, steps, clients int, in io.Reader, out io.Writer) error {
	if db == "" {
		return fmt.Errorf("-db is required")
	}
	ctx, err := dbos.NewContext(context.Background(), dbos.Config{AppName: "weir-bench-peer", DatabaseURL: db,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer dbos.Shutdown(ctx, 10*time.Second)
	chain := func(ctx dbos.Context, payload string) (string, error) {
		for range steps {
			var err error
			if payload, err = dbos.RunAsStep(ctx, func(context.Context) (string, error) { return echo(payload), nil }); err != nil {
				return "", err
			}
		}
		return payload, nil
	}
	dbos.RegisterWorkflow(ctx, chain)
	if err := dbos.Launch(ctx); err != nil {
		return err
	}
	payload := strings.Repeat("a", 100)
	wait := func(n int) error {
		for range n {
			h, err := dbos.RunWorkflow(ctx, chain, payload)
			if err != nil {
				return err
			}
			got, err := h.GetResult()
			if err != nil {
				return err
			}
			if got != payload {
				return fmt.Errorf("workflow answered %q", got)
			}
		}
		return nil
	}
	if err := wait(clients); err != nil { // warm: pools open, workflow loaded
		return err
	}

	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the go: %w", err)
	}
	start := time.Now()
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		n := runs / clients
		if c < runs%clients {
			n++
		}
		wg.Go(func() { errs <- wait(n) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return json.NewEncoder(out).Encode(result{Runs: runs, Steps: steps, ElapsedNS: time.Since(start).Nanoseconds()})
}

// echo is the step's work: the payload back, as testkit.echo answers.
func echo(p string) string { return p }
