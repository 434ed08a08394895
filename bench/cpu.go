package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/bench/internal/daemon"
)

// CPU time is read from /proc: utime and stime of a process (and cutime and
// cstime, what its children that ended and were reaped used), in clock
// ticks. Linux reports them in USER_HZ, which is 100 on every architecture
// Go supports.
const clockTick = 10 * time.Millisecond

// procTimes is one process's CPU times from /proc/PID/stat.
type procTimes struct {
	ppid         int
	self, reaped time.Duration // utime+stime; cutime+cstime
	found        bool
}

func readProc(pid int) (procTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if os.IsNotExist(err) {
			return procTimes{}, nil
		}
		return procTimes{}, err
	}
	return parseStat(pid, b)
}

// parseStat reads /proc/PID/stat's content b.
func parseStat(pid int, b []byte) (procTimes, error) {
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procTimes{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procTimes{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var n [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		var err error
		if n[k], err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return procTimes{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return procTimes{
		ppid:   int(n[0]),
		self:   time.Duration(n[1]+n[2]) * clockTick,
		reaped: time.Duration(n[3]+n[4]) * clockTick,
		found:  true,
	}, nil
}

// allProcs reads every process's times.
func allProcs() (map[int]procTimes, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make(map[int]procTimes, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(pid)
		if err != nil {
			return nil, err
		}
		if p.found {
			out[pid] = p
		}
	}
	return out, nil
}

// daemonParts charges a load to the daemons in two parts: the `weir serve`
// processes themselves, and everything they started (plugin processes,
// sandbox workers), alive or ended.
func daemonParts(ds []*daemon.Daemon) []cpuPart {
	self := func() (time.Duration, error) {
		var sum time.Duration
		for _, d := range ds {
			p, err := readProc(d.Pid())
			if err != nil {
				return 0, err
			}
			if !p.found {
				return 0, fmt.Errorf("weir serve %d has ended", d.Pid())
			}
			sum += p.self
		}
		return sum, nil
	}
	children := func() (time.Duration, error) {
		procs, err := allProcs()
		if err != nil {
			return 0, err
		}
		var sum time.Duration
		for _, d := range ds {
			sum += procs[d.Pid()].reaped
			for pid, p := range procs {
				if pid != d.Pid() && descends(procs, pid, d.Pid()) {
					sum += p.self + p.reaped
				}
			}
		}
		return sum, nil
	}
	return []cpuPart{{"weir serve", self}, {"plugins and sandbox workers", children}}
}

// descends reports whether pid is a descendant of root.
func descends(procs map[int]procTimes, pid, root int) bool {
	for range 64 { // a bound on depth, against a cycle read across pid reuse
		p, ok := procs[pid]
		if !ok || p.ppid <= 1 {
			return false
		}
		if p.ppid == root {
			return true
		}
		pid = p.ppid
	}
	return false
}

// selfPart charges a load the bench driver's own CPU: the clients that
// submit and poll.
func selfPart() cpuPart {
	return cpuPart{"bench clients", func() (time.Duration, error) {
		p, err := readProc(os.Getpid())
		return p.self, err
	}}
}

// machinePart is the whole machine: the last part of every load, beside
// which the others are read.
func machinePart() cpuPart { return cpuPart{"machine", machineBusy} }

// machineBusy is the CPU time every process of the machine used so far
// (the non-idle time of /proc/stat's cpu line), the denominator that shows
// how much of the machine a load had.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// idle and iowait are not busy; guest time is already in user.
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return time.Duration(busy) * clockTick, nil
}
