package main

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestParseStat: the fields are counted after the last ')', since a
// command name may hold spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := "4242 (we (ir) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 31 7 3 20 0 12 0 100 1000 10 18446744073709551615\n"
	p, err := parseStat(4242, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := procTimes{ppid: 17, self: 281 * clockTick, reaped: 10 * clockTick, found: true}
	if p != want {
		t.Fatalf("parseStat = %+v, want %+v", p, want)
	}
	for _, bad := range []string{"4242 no name S 1 2", "4242 (x) S 1 2 3", "4242 (x) S 1 1 1 0 -1 0 0 0 0 0 u 1 0 0 20"} {
		if _, err := parseStat(4242, []byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

// TestReadProcSelf: this process is found, with its parent; a process that
// does not exist is not found and is no error.
func TestReadProcSelf(t *testing.T) {
	p, err := readProc(os.Getpid())
	if err != nil || !p.found || p.ppid != os.Getppid() {
		t.Fatalf("readProc(self) = %+v, %v; want found with ppid %d", p, err, os.Getppid())
	}
	if p, err := readProc(1 << 30); err != nil || p.found {
		t.Fatalf("readProc(no such pid) = %+v, %v; want not found", p, err)
	}
	if _, err := machineBusy(); err != nil {
		t.Fatal(err)
	}
}

// TestDescends: children and grandchildren descend from the root; a
// process elsewhere, or in a cycle of parents, does not.
func TestDescends(t *testing.T) {
	procs := map[int]procTimes{
		10: {ppid: 1}, 11: {ppid: 10}, 12: {ppid: 11},
		20: {ppid: 1},
		30: {ppid: 31}, 31: {ppid: 30},
	}
	for pid, want := range map[int]bool{11: true, 12: true, 10: false, 20: false, 30: false, 99: false} {
		if got := descends(procs, pid, 10); got != want {
			t.Errorf("descends(%d, 10) = %v, want %v", pid, got, want)
		}
	}
}

// TestCPURow: each part per step, their sum in cores beside the machine's.
func TestCPURow(t *testing.T) {
	steps := time.Duration(stepRuns * stepsPerRun)
	r := stepsResult{
		steps:   stepRuns * stepsPerRun,
		elapsed: 10 * time.Second,
		parts:   []string{"a", "b", "machine"},
		cpu:     []time.Duration{steps * 300 * time.Microsecond, steps * 200 * time.Microsecond, 20 * time.Second},
	}
	got := cpuRow("CPU per step", r)
	want := row{figure: "CPU per step: a 300 µs, b 200 µs", value: "500 µs (0.50 cores)", limit: fmt.Sprintf("machine busy 2.00 cores of %d", runtime.NumCPU()), ratio: "0.25x"}
	if got != want {
		t.Fatalf("cpuRow = %+v\nwant %+v", got, want)
	}
}

// TestStoreCounts: the counts of the store's closing line are read from a
// daemon's log in hclog's text and JSON forms, and summed over lines.
func TestStoreCounts(t *testing.T) {
	var c storeCounts
	c.add("2026-12-07T14:41:00Z [INFO]  weir.store: store closed: commits=10 updates=20 conflicts=3 claimed=40\nother line conflicts=99\n")
	c.add(`{"@level":"info","@message":"store closed","@module":"weir.store","claimed":2,"commits":1,"conflicts":5,"updates":3}` + "\n")
	if c != (storeCounts{conflicts: 8, claimed: 42}) {
		t.Fatalf("%+v, want 8 conflicts and 42 claimed", c)
	}
}
