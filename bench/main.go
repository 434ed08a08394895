// Command bench runs weir's benchmark scenarios on the real binary and
// plugins (bin/weir and bin/plugins, built and pinned by `make build`) and
// prints one Markdown table: each figure beside the physical limit it is
// judged against, measured in the same run, and their ratio. The machine is
// shared and noisy, so the ratios are what count, not the absolute figures.
//
//	go run ./bench            # every scenario
//	go run ./bench -only 3    # one scenario
//
// Scenario 11 runs daemons on the PostgreSQL server of -postgres (default
// WEIR_TEST_POSTGRES_URL, else the project machines' database) in a
// database it creates and drops; without one it prints a row saying it was
// skipped and why.
//
// Each scenario is one function in the scenarios table; a scenario that the
// engine cannot run yet prints a row saying what it waits for, never a
// number.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/testutil/pgtest"
)

// row is one line of the table.
type row struct {
	scenario int
	figure   string
	value    string
	limit    string // the physical limit, measured in the same run
	ratio    string
	target   string // the target and whether it is met
}

// scenario is one benchmark of the table.
type scenario struct {
	n    int
	name string
	run  func(b *bench) ([]row, error)
}

// scenarios is the table's content, in order. Adding a scenario is adding
// one entry and its function.
var scenarios = []scenario{
	{1, "raw limits", rawLimits},
	{2, "tool call through the host", toolCall},
	{3, "durable steps/s", durableSteps},
	{4, "subflow resume latency", subflowResume},
	{5, "fan-out close", fanout},
	{6, "100,000 parked runs", parked},
	{7, "registration", registration},
	{8, "overload", overload},
	{9, "agent turn", agentTurn},
	{10, "MCP tool call through weir", mcpCall},
	{11, "durable steps/s, a fleet on PostgreSQL", fleetSteps},
	{12, "one owner cannot starve another", fairShare},
	{13, "recovery operations", recovery},
	{14, "schedules", schedules},
	{15, "durable steps/s with tracing", tracingSteps},
	{16, "peer: DBOS Transact on the same PostgreSQL", dbosPeer},
	{17, "replay of a recorded run", replayRun},
	{18, "agent cost per turn", agentTurnCost},
	{19, "registration beside parked runs", parkedCompat},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.Int("only", 0, "run only scenario N")
	weir := fs.String("weir", "bin/weir", "the weir binary")
	plugins := fs.String("plugins", "bin/plugins", "the pinned plugins directory")
	dir := fs.String("dir", "", "where scenarios put their data (default: the system's temporary directory)")
	overloadFor := fs.Duration("overload", 30*time.Second, "how long scenario 8 offers 10x the admissible load")
	postgres := fs.String("postgres", pgtest.BaseURL(), "the PostgreSQL server scenario 11 creates its database on (env "+pgtest.EnvURL+")")
	parkedRuns := fs.Int("parked", 100000, "how many runs scenario 6 parks (at most; it stops submitting after 70s)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bench{ctx: ctx, log: stderr, overloadFor: *overloadFor, parked: *parkedRuns, postgres: *postgres}
	var err error
	if b.weir, err = filepath.Abs(*weir); err == nil {
		b.plugins, err = filepath.Abs(*plugins)
	}
	if err == nil {
		err = checkBinaries(b.weir, b.plugins)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	root, err := os.MkdirTemp(*dir, "weir-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(root)
	b.root = root
	defer b.close()

	var rows []row
	failed := false
	for _, s := range scenarios {
		if *only != 0 && s.n != *only {
			continue
		}
		start := time.Now()
		fmt.Fprintf(stderr, "scenario %d: %s\n", s.n, s.name)
		rs, err := s.run(b)
		if err != nil {
			failed = true
			fmt.Fprintf(stderr, "scenario %d: %v\n", s.n, err)
			rs = append(rs, row{scenario: s.n, figure: s.name, value: "error: " + firstLine(err.Error())})
		}
		for i := range rs {
			rs[i].scenario = s.n
		}
		rows = append(rows, rs...)
		fmt.Fprintf(stderr, "scenario %d: done in %v\n", s.n, time.Since(start).Round(100*time.Millisecond))
		if ctx.Err() != nil {
			break
		}
	}
	if *only != 0 && len(rows) == 0 {
		fmt.Fprintf(stderr, "bench: no scenario %d\n", *only)
		return 2
	}
	fmt.Fprintln(stdout, machineLine())
	fmt.Fprintln(stdout)
	printTable(stdout, rows)
	if failed {
		return 1
	}
	return 0
}

// checkBinaries refuses to start without what `make build` produces.
func checkBinaries(weir, plugins string) error {
	if _, err := os.Stat(weir); err != nil {
		return fmt.Errorf("%v (run `make build`, or pass -weir)", err)
	}
	for _, p := range []string{"testkit", "mail", "pins.json"} {
		if _, err := os.Stat(filepath.Join(plugins, p)); err != nil {
			return fmt.Errorf("%v (run `make build`, or pass -plugins)", err)
		}
	}
	return nil
}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| # | figure | measured | limit (same run) | ratio | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", r.scenario, r.figure, dash(r.value), dash(r.limit), dash(r.ratio), dash(r.target))
	}
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// machineLine says where the table was measured.
func machineLine() string {
	uname := "?"
	if out, err := exec.Command("uname", "-srm").Output(); err == nil {
		uname = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("machine: %s, nproc %d, %s, %s", uname, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

// Formatting of figures.

func perSec(v float64) string { return fmt.Sprintf("%s/s", thousands(v)) }

func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func ratio(v float64) string { return fmt.Sprintf("%.2fx", v) }

// verdict says whether a target is met.
func verdict(target string, met bool) string {
	if met {
		return target + ": met"
	}
	return target + ": **missed**"
}
