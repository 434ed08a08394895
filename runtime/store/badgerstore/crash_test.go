package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// The helper process: the test binary re-runs itself with helperEnv set to
// a mode and helperDirEnv to the store's directory; TestMain sends it to
// runHelper instead of the tests.
const (
	helperEnv    = "WEIR_BADGERSTORE_HELPER"
	helperDirEnv = "WEIR_BADGERSTORE_DIR"
)

// crashOptions makes memtables small so that the crash test's writes rotate
// through several of them (and their write-ahead logs) before the kill.
var crashOptions = Options{MemTableSize: 1 << 20, NumMemtables: 2}

func runHelper(mode string) int {
	dir := os.Getenv(helperDirEnv)
	switch mode {
	case "crash":
		return crashWriter(dir)
	case "parked":
		return parkedReader(dir)
	case "hold":
		s, err := Open(dir, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("open")
		_, _ = io.Copy(io.Discard, os.Stdin) // hold until the parent closes stdin
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// crashPayload is the continuation each acknowledged Update writes.
func crashPayload(id string) []byte {
	return []byte(strings.Repeat(id+";", 40))
}

// crashWriter runs concurrent Updates until it is killed, printing one line
// per acknowledged Update: "ack <run id> <event seq>". A line is written
// only after Update returned nil, so every line the parent reads is a
// promise of durability.
func crashWriter(dir string) int {
	s, err := Open(dir, crashOptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	pid := os.Getpid() // ids differ between rounds on the same store
	for g := range 32 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%02d-%07d", pid, g, i)
				e := &store.Event{RunID: id, Type: "queued", At: time.Now()}
				err := s.Update(ctx, func(tx store.Tx) error {
					return first(
						tx.RunInsert(&store.Run{ID: id, Owner: "crash", Phase: store.PhaseQueued}),
						tx.TaskPut(&store.Task{ID: "t-" + id, RunID: id, ReadyAt: time.Now()}),
						tx.ContinuationPut(id, crashPayload(id)),
						tx.EventAppend(e))
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s %d\n", id, e.Seq)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// helper starts the test binary in a helper mode on dir.
func helper(t *testing.T, mode, dir string) (*exec.Cmd, io.WriteCloser, io.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout, &stderr
}

// TestCrashKeepsAcknowledgedWrites SIGKILLs a process in the middle of a
// stream of concurrent Updates and checks that every Update it
// acknowledged is in the store afterwards, whole.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	for round := range 2 { // the second round recovers a store that already crashed once
		cmd, stdin, stdout, stderr := helper(t, "crash", dir)
		acked := map[string]uint64{}
		sc := bufio.NewScanner(stdout)
		const killAt = 3000
		killed := false
		for sc.Scan() {
			var id string
			var seq uint64
			if _, err := fmt.Sscanf(sc.Text(), "ack %s %d", &id, &seq); err != nil {
				t.Fatalf("helper printed %q: %v", sc.Text(), err)
			}
			acked[id] = seq
			if len(acked) == killAt && !killed {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
				// Keep reading: lines already in the pipe were acknowledged too.
			}
		}
		stdin.Close()
		err := cmd.Wait()
		var exit *exec.ExitError
		if !killed || !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("helper was not killed mid-stream (killed %v, %d acks): %v\n%s", killed, len(acked), err, stderr)
		}

		// The acknowledged writes must have spanned a memtable rotation:
		// a flushed table, or more than one memtable log.
		ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
		mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
		if round == 0 && len(ssts) == 0 && len(mems) < 2 {
			t.Fatalf("no memtable rotation before the kill (%d tables, %d memtable logs): the test would not cover it", len(ssts), len(mems))
		}

		s, err := Open(dir, crashOptions)
		if err != nil {
			t.Fatalf("reopen after SIGKILL: %v", err)
		}
		var present int
		err = s.View(ctx, func(tx store.Tx) error {
			for id, seq := range acked {
				if _, err := tx.RunGet(id); err != nil {
					return fmt.Errorf("acknowledged run %s: %w", id, err)
				}
				evs, err := tx.EventList(store.EventListParams{RunID: id})
				if err != nil || len(evs) != 1 || evs[0].Seq != seq {
					return fmt.Errorf("acknowledged run %s: events %v (%v), want one with Seq %d", id, evs, err, seq)
				}
			}
			// Every run in the store, acknowledged or not, is whole: a
			// commit is all or nothing.
			runs, err := tx.RunList(store.RunListParams{})
			if err != nil {
				return err
			}
			present = len(runs)
			for _, r := range runs {
				c, err := tx.ContinuationGet(r.ID)
				if err != nil || !bytes.Equal(c, crashPayload(r.ID)) {
					return fmt.Errorf("run %s: continuation %q, %v", r.ID, c, err)
				}
				if _, err := tx.TaskGet("t-" + r.ID); err != nil {
					return fmt.Errorf("run %s: task: %w", r.ID, err)
				}
			}
			q, _, err := tx.TaskCount()
			return first(err, check(q == len(runs), "TaskCount %d, %d runs", q, len(runs)))
		})
		if cerr := s.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if present < len(acked) {
			t.Fatalf("%d runs present, %d acknowledged", present, len(acked))
		}
		t.Logf("round %d: %d acknowledged, %d present after SIGKILL (%d tables, %d memtable logs at the kill)",
			round, len(acked), present, len(ssts), len(mems))
	}
}

// TestOpenLockedByAnotherProcess opens the store in a helper process and
// checks that Open here is refused with ErrLocked until it exits.
func TestOpenLockedByAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, stdin, stdout, stderr := helper(t, "hold", dir)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "open\n" {
		t.Fatalf("helper said %q, %v\n%s", line, err, stderr)
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Open of a directory another process holds: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "another process") {
		t.Fatalf("ErrLocked message does not say why: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after the other process exited: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A kill just as Badger created a write buffer's log leaves an empty .mem
// file; the store must open over it (Badger alone fails once with "Create
// a new file") with every acknowledged write in place.
func TestOpenOverAnEmptyWriteBufferLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir, crashOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.RunInsert(&store.Run{ID: "run_kept", Owner: "alice", Phase: store.PhaseQueued})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00099.mem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, crashOptions)
	if err != nil {
		t.Fatalf("open over an empty write-buffer log: %v", err)
	}
	defer s.Close()
	if err := s.View(ctx, func(tx store.Tx) error {
		_, err := tx.RunGet("run_kept")
		return err
	}); err != nil {
		t.Fatalf("the acknowledged run after the reopen: %v", err)
	}
}
