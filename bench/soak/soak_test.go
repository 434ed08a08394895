package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Plugins("testkit", "mail", "notes", "llm"), testutil.Weir())
}

// TestSoakShort is a short soak: 18 s of kills (every failpoint at
// least once, then at random) under the mixed workload, then recovery and
// every invariant. The nine failpoints armed in turn take about 12 s of
// daemon starts and epochs on a quiet machine; the rest is margin, so the
// last of them is not cut short by the end of the chaos. A failure names
// its seed (WEIR_SOAK_SEED=N replays the same choices) and keeps the data
// directory.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir daemons for about 40 s")
	}
	start := time.Now()
	weir, plugins := testutil.WeirBinary(t), testutil.PinnedPlugins(t)
	built := time.Since(start)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEIR_SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("WEIR_SOAK_SEED: %v", err)
		}
	}
	root, err := dataDir("")
	if err != nil {
		t.Fatal(err)
	}
	var log, out strings.Builder
	cfg := Config{Weir: weir, Plugins: plugins, Duration: 18 * time.Second, Drain: 15 * time.Second, Seed: seed,
		Data: filepath.Join(root, "data"), Log: &log, Out: &out}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("soak: %v\n%s\nseed %d; data kept in %s", err, log.String(), seed, root)
	}
	t.Logf("%s%s(built in %v, %v in all)", log.String(), out.String(), built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if rep.Failed > 0 || rep.Passed != len(invariants) {
		t.Fatalf("%d passed, %d failed of %d invariants\nreproduce with WEIR_SOAK_SEED=%d (or go run ./bench/soak -seed %d -duration %v); data kept in %s",
			rep.Passed, rep.Failed, len(invariants), seed, seed, cfg.Duration, root)
	}
	// The soak must have done what it claims, or passing means nothing.
	if rep.Accepted < 100 || rep.Daemons < len(failpoints)+2 {
		t.Fatalf("only %d runs accepted over %d daemons: the workload did not run", rep.Accepted, rep.Daemons)
	}
	for _, fp := range failpoints {
		if rep.Kills[fp] == 0 {
			t.Fatalf("failpoint %s never fired: %v", fp, rep.Kills)
		}
	}
	os.RemoveAll(root)
}

// TestSoakCatchesInjectedLoss arms drop-accepted in every daemon, which
// answers "accepted" for a run it never writes: "none lost" must fail and
// name that run, or a green soak would prove nothing.
func TestSoakCatchesInjectedLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real weir daemons for about 15 s")
	}
	weir, plugins := testutil.WeirBinary(t), testutil.PinnedPlugins(t)
	root, err := dataDir("")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	var log, out strings.Builder
	cfg := Config{Weir: weir, Plugins: plugins, Duration: 3 * time.Second, Drain: 10 * time.Second, Seed: 1,
		Failpoint: "drop-accepted@3", Data: filepath.Join(root, "data"), Log: &log, Out: &out}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, log.String())
	}
	if rep.Invariants[invLost] {
		t.Fatalf("%q passed with an accepted run dropped:\n%s%s", invLost, log.String(), out.String())
	}
	if !strings.Contains(out.String(), "was accepted and is not in the store") {
		t.Fatalf("the loss is not named:\n%s", out.String())
	}
}

// TestChecksCatchViolations feeds each end-of-soak check a world and a
// store state that break its promise, and one that keeps it: a check that
// cannot fail would prove nothing.
func TestChecksCatchViolations(t *testing.T) {
	t.Parallel()
	var cases []violationCase
	for _, c := range [][]violationCase{violationCases(), fleetViolationCases(), tickViolationCases(), eventViolationCases(), forkViolationCases(),
		resolveViolationCases(), redriveViolationCases(), steerViolationCases(), topupViolationCases(), wasteViolationCases()} {
		cases = append(cases, c...)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, f := tt.build()
			got := tt.check(w, f)
			if tt.want == "" {
				if len(got) > 0 {
					t.Fatalf("clean state reported %q", got)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Fatalf("got %q, want a violation mentioning %q", got, tt.want)
			}
		})
	}
}
