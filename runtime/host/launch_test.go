package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

// hugelinePids runs fn, which launches testdata/hugeline, with TMPDIR set
// so that hugeline records its pids; it returns the pids and fn's error.
// (Build the binary before: the build directory is under TMPDIR.)
// fn must return long before hugeline's children would exit on their own:
// if it does not, they are killed (so that fn returns and nothing leaks)
// and the test fails.
func hugelinePids(t *testing.T, fn func() error) ([]int, error) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	pids := func() []int {
		b, _ := os.ReadFile(filepath.Join(tmp, "hugeline.pids"))
		var out []int
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return pids(), err
	case <-time.After(time.Minute):
		for _, pid := range pids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-done
		t.Fatal("the launch waited on the plugin's children instead of ending them")
		return nil, nil
	}
}

// processEnded waits until pid has exited: gone, or a zombie that only
// its new parent can reap (an orphan's parent is init, whatever reaps).
func processEnded(t *testing.T, pid int) {
	t.Helper()
	// A pid is reused once its process is reaped (pid_max may be as low
	// as 32768, and a test run starts thousands of processes): the
	// process is the one that had this start time at the first look.
	var start string
	testutil.Eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		// The state follows the command name in parentheses; the start
		// time is the 22nd field, the 20th after them.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			return fmt.Errorf("process %d: stat %q", pid, b)
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 20 {
			return fmt.Errorf("process %d: stat %q", pid, b)
		}
		if start == "" {
			start = fields[19]
		}
		if fields[0] == "Z" || fields[19] != start {
			return nil // ended (a zombie), or ended and its pid reused
		}
		return fmt.Errorf("process %d still running", pid)
	})
}

func TestInstallEndsAFailedHandshakeAndItsChildren(t *testing.T) {
	dir, bin := t.TempDir(), testutil.Plugin(t, "hugeline")
	pids, err := hugelinePids(t, func() error {
		_, err := Install(dir, bin, nil)
		return err
	})
	te := wantKind(t, err, KindProtocol)
	if !strings.Contains(te.Message, "no handshake line") || !strings.Contains(te.Message, "64 KiB") {
		t.Fatalf("message %q does not say the handshake line was missing or too long", te.Message)
	}
	if len(te.Message) > 8<<10 {
		t.Fatalf("message of %d bytes: the plugin's line reached it", len(te.Message))
	}
	if len(pids) != 2 {
		t.Fatalf("hugeline recorded pids %v, want its own and its child's", pids)
	}
	for _, pid := range pids {
		processEnded(t, pid)
	}
	if pins, _ := ReadPins(dir); len(pins) != 0 {
		t.Fatalf("refused plugin was pinned: %v", pins)
	}
}

// The daemon's path: a pinned binary that fails its handshake at launch
// fails the call at once and leaves nothing running.
func TestLaunchEndsAFailedHandshakeAndItsChildren(t *testing.T) {
	h := pinnedByHand(t, "hugeline", "huge")
	defer h.Close()
	pids, err := hugelinePids(t, func() error {
		_, err := call(t, h, "huge.x", `{}`)
		return err
	})
	wantKind(t, err, KindProtocol)
	if len(pids) != 2 {
		t.Fatalf("hugeline recorded pids %v, want its own and its child's", pids)
	}
	for _, pid := range pids {
		processEnded(t, pid)
	}
}
