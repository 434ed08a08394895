package badgerstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// BenchmarkCommit measures, in one run and on the same disk, the limits a
// durable commit is judged against and the store's Update through group
// commit:
//
//	fsync             write+fsync of a small file: the one-sync-per-commit ceiling
//	badger/writers=N  Badger transactions with SyncWrites from N goroutines
//	badger/group=64   Badger transactions of 64 keys (one sync shared by 64
//	                  one-key commits): the group-commit ceiling
//	update/writers=N  Store.Update with one small write, from N goroutines
//	update-step/...   Store.Update shaped like an engine step (continuation,
//	                  task, event)
//
// Every case reports commits/s (one-key commits for group=64); update
// cases also report how many functions shared one sync.
func BenchmarkCommit(b *testing.B) {
	report := func(b *testing.B, n int, d time.Duration) {
		b.ReportMetric(float64(n)/d.Seconds(), "commits/s")
		b.ReportMetric(0, "ns/op") // the rate is the figure; ns/op of a parallel loop misleads
	}
	b.Run("fsync", func(b *testing.B) {
		d, err := MeasureFsync(b.TempDir(), b.N)
		if err != nil {
			b.Fatal(err)
		}
		report(b, b.N, d)
	})
	for _, w := range []int{1, 64} {
		b.Run(fmt.Sprintf("badger/writers=%d", w), func(b *testing.B) {
			d, err := MeasureBadgerCommits(b.TempDir(), w, 1, b.N)
			if err != nil {
				b.Fatal(err)
			}
			report(b, b.N, d)
		})
	}
	b.Run("badger/group=64", func(b *testing.B) {
		txns := (b.N + 63) / 64
		d, err := MeasureBadgerCommits(b.TempDir(), 1, 64, txns)
		if err != nil {
			b.Fatal(err)
		}
		report(b, txns*64, d)
	})
	val := make([]byte, 64)
	for _, w := range []int{1, 64} {
		b.Run(fmt.Sprintf("update/writers=%d", w), func(b *testing.B) {
			s := openBench(b)
			d, err := MeasureUpdates(ctx, s, w, b.N, func(i int) func(store.Tx) error {
				return func(tx store.Tx) error { return tx.ContinuationPut(fmt.Sprint("r", i), val) }
			})
			if err != nil {
				b.Fatal(err)
			}
			report(b, b.N, d)
			st := s.Stats()
			b.ReportMetric(float64(st.Updates)/float64(st.Commits), "updates/sync")
		})
	}
	for _, w := range []int{16, 64} {
		b.Run(fmt.Sprintf("update-step/writers=%d", w), func(b *testing.B) {
			s := openBench(b)
			d, err := MeasureUpdates(ctx, s, w, b.N, StepUpdates(w))
			if err != nil {
				b.Fatal(err)
			}
			report(b, b.N, d)
			st := s.Stats()
			b.ReportMetric(float64(st.Updates)/float64(st.Commits), "updates/sync")
		})
	}
}

// BenchmarkLimits measures Update from 1 and 64 goroutines beside the
// disk's limits in interleaved rounds (MeasureLimits) and reports each
// rate and the ratios that matter. Run it with -benchtime 1x.
func BenchmarkLimits(b *testing.B) {
	for range b.N {
		l, err := MeasureLimits(b.TempDir(), 3)
		if err != nil {
			b.Fatal(err)
		}
		for name, v := range map[string]float64{
			"fsync/s": l.Fsync, "badger1/s": l.Badger1, "badger64/s": l.Badger64, "badger-group64/s": l.BadgerGroup64,
			"update1/s": l.Update1, "update64/s": l.Update64, "updates/sync": l.UpdatesPerSync,
			"update64/badger64": l.Update64 / l.Badger64, "update64/badger-group64": l.Update64 / l.BadgerGroup64,
			"update64/fsync": l.Update64 / l.Fsync, "update1/badger1": l.Update1 / l.Badger1,
			"step64/s": l.Step64, "step64/badger64": l.Step64 / l.Badger64,
		} {
			b.ReportMetric(v, name)
		}
		b.ReportMetric(0, "ns/op")
	}
}

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// BenchmarkParked stores 100,000 runs parked on waits (run, parked task
// waiting on a child, 1 KiB continuation, one event), then, in a fresh
// process as a restarting daemon would, opens the store, lists the ready
// queue past the parked tasks, lists the unfinished runs (what recovery
// reads) and scans every run. It reports the times and that process's
// memory: Go heap in use, anonymous resident memory (heap, Badger's
// memtables and caches) and file-backed resident memory (table and log
// pages mapped by Badger: page cache the kernel reclaims under pressure).
// Run it with -benchtime 1x.
func BenchmarkParked(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	cont := make([]byte, 1<<10)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < parkedRuns; i += 1000 {
		err := s.Update(ctx, func(tx store.Tx) error {
			for j := i; j < i+1000; j++ {
				id := fmt.Sprintf("run-%07d", j)
				err := first(
					tx.RunInsert(&store.Run{ID: id, Flow: "f", Version: "h", Owner: "o", Phase: store.PhaseWaiting, Attempt: 1, CreatedAt: now, UpdatedAt: now}),
					tx.TaskPut(&store.Task{ID: "t-" + id, RunID: id, Kind: store.TaskStep, Node: "wait", ReadyAt: now.Add(time.Hour), WaitChild: "child-" + id, WaitKind: "child", CreatedAt: now}),
					tx.ContinuationPut(id, cont),
					tx.EventAppend(&store.Event{RunID: id, At: now, Type: "waiting"}))
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=parked", helperDirEnv+"="+dir)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("helper: %v\n%s", err, out)
		}
		var m map[string]float64
		if err := json.Unmarshal(out, &m); err != nil {
			b.Fatalf("helper printed %q: %v", out, err)
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			b.ReportMetric(m[k], k)
		}
		b.ReportMetric(0, "ns/op")
	}
}

const parkedRuns = 100_000

// parkedReader is BenchmarkParked's fresh process: it prints its figures
// as a JSON object of metric name to value.
func parkedReader(dir string) int {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := map[string]float64{}
	start := time.Now()
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m["open-ms"] = ms(time.Since(start))
	err = s.View(ctx, func(tx store.Tx) error {
		start := time.Now()
		ts, err := tx.TaskListReady(now, 0)
		m["list-ready-µs"] = float64(time.Since(start).Microseconds())
		if err != nil || len(ts) != 0 {
			return fmt.Errorf("ready tasks: %d, %v", len(ts), err)
		}
		start = time.Now()
		rs, err := tx.RunList(store.RunListParams{Phase: store.PhaseWaiting})
		m["list-unfinished-ms"] = ms(time.Since(start))
		if err != nil || len(rs) != parkedRuns {
			return fmt.Errorf("waiting runs: %d, %v", len(rs), err)
		}
		rs = nil
		runtime.GC()
		m["anon-after-list-MiB"] = float64(procStatus("RssAnon")) / 1024
		start = time.Now()
		rs, err = tx.RunList(store.RunListParams{})
		m["scan-all-ms"] = ms(time.Since(start))
		if err != nil || len(rs) != parkedRuns {
			return fmt.Errorf("all runs: %d, %v", len(rs), err)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	m["heap-MiB"] = float64(mem.HeapInuse) / (1 << 20)
	m["anon-MiB"] = float64(procStatus("RssAnon")) / 1024
	m["file-MiB"] = float64(procStatus("RssFile")) / 1024
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, _ := json.Marshal(m)
	fmt.Println(string(out))
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// procStatus reads a kB field of /proc/self/status (Linux; 0 elsewhere).
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb
		}
	}
	return 0
}

// BenchmarkRunListNewest lists one page of 100 of an owner's runs newest
// first, from the start and from a cursor deep in the list, among 1,000
// and 100,000 runs: a page costs about the same however many runs there
// are and wherever it starts (the rc/ index).
func BenchmarkRunListNewest(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		s, err := Open(b.TempDir(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for lo := 0; lo < n; lo += 500 {
			err := s.Update(b.Context(), func(tx store.Tx) error {
				for i := lo; i < lo+500 && i < n; i++ {
					r := &store.Run{ID: fmt.Sprintf("run_%08x", uint32(i)*2654435761), Flow: "f", Version: "h", Owner: "o",
						InputHash: "ih", Phase: store.PhaseCompleted, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
					if err := tx.RunInsert(r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, at := range []string{"first", "middle"} {
			p := store.RunListParams{Owner: "o", Order: store.OrderNewest, Limit: 100}
			if at == "middle" {
				p.Before = &store.RunCursor{CreatedAt: t0.Add(time.Duration(n/2) * time.Second), ID: fmt.Sprintf("run_%08x", uint32(n/2)*2654435761)}
			}
			b.Run(fmt.Sprintf("runs=%d/page=%s", n, at), func(b *testing.B) {
				for b.Loop() {
					err := s.View(b.Context(), func(tx store.Tx) error {
						rs, err := tx.RunList(p)
						if err == nil && len(rs) != 100 {
							err = fmt.Errorf("%d runs, want 100", len(rs))
						}
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
