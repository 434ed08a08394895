package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// The soak's section of bench/RESULTS.md lies between these markers; `make
// bench` owns the rest of the file.
const (
	sectionBegin = "<!-- soak:begin (written by make soak) -->"
	sectionEnd   = "<!-- soak:end -->"
	keepRows     = 10
)

// resultRow is one soak's line in the section: what ran, what was killed,
// what the drain found, and the verdict.
func resultRow(cfg Config, rep *Report) string {
	var fps []string
	for _, fp := range failpoints {
		fps = append(fps, fmt.Sprintf("%s %d", fp, rep.Kills[fp]))
	}
	verdict := fmt.Sprintf("%d passed, %d failed", rep.Passed, rep.Failed)
	if rep.Failed > 0 {
		verdict = "**" + verdict + "**"
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %s | %d | %d | %d | %v | %v | %s | %s |",
		time.Now().UTC().Format("2006-01-02 15:04"), chaosCell(cfg), rep.Daemons, rep.Accepted, strings.Join(fps, ", "),
		rep.Kills["random"], rep.Kills["crash"], rep.Drain.Backlog, rep.Drain.Bound.Round(time.Second),
		rep.Drain.Took.Round(100*time.Millisecond), drainEnd(rep.Drain), verdict)
}

// chaosCell is how long the chaos ran, and on what: a fleet's row says
// how many daemons shared the database.
func chaosCell(cfg Config) string {
	if cfg.Fleet == 0 {
		return cfg.Duration.String()
	}
	return fmt.Sprintf("%v, fleet of %d on PostgreSQL", cfg.Duration, cfg.Fleet)
}

func drainEnd(d drainReport) string {
	switch {
	case d.Quiescent:
		return fmt.Sprintf("quiescent, %d stuck", d.Left)
	case d.OutOfTime:
		return fmt.Sprintf("bound, %d still moving", d.Left)
	}
	return "all ended or parked"
}

// writeResults puts row at the top of the soak section of the file at
// path (made if missing), keeping the newest rows.
func writeResults(path string, row string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(old)
	var rows []string
	before, after := text, ""
	if i := strings.Index(text, sectionBegin); i >= 0 {
		j := strings.Index(text, sectionEnd)
		if j < i {
			return fmt.Errorf("%s: %q without %q after it", path, sectionBegin, sectionEnd)
		}
		for _, l := range strings.Split(text[i:j], "\n") {
			if strings.HasPrefix(l, "| 2") { // a row starts with its date
				rows = append(rows, l)
			}
		}
		before, after = text[:i], text[j+len(sectionEnd):]
	} else {
		before = strings.TrimRight(text, "\n") + "\n\n## Soak\n\n"
	}
	rows = append([]string{row}, rows...)
	if len(rows) > keepRows {
		rows = rows[:keepRows]
	}
	var b strings.Builder
	b.WriteString(sectionBegin + "\n")
	fmt.Fprintf(&b, "`make soak SOAK=D`: a real daemon under the mixed workload, SIGKILLed at every failpoint and at random for D,\n")
	fmt.Fprintf(&b, "then one clean daemon drains until quiescent (bounded by the backlog it measures) and every invariant is\n")
	fmt.Fprintf(&b, "checked. `make soak FLEET=N` runs N daemons on one PostgreSQL schema, each killed and restarted on its own.\n")
	fmt.Fprintf(&b, "Newest first; machine of the newest: %s %s, nproc %d, %s.\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	b.WriteString("| when (UTC) | chaos | daemons | runs accepted | kills by failpoint | random kills | crashes | backlog at drain | drain bound | drain took | drain ended | invariants |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	b.WriteString(sectionEnd)
	if after == "" {
		after = "\n"
	}
	return os.WriteFile(path, []byte(before+b.String()+after), 0o644)
}
