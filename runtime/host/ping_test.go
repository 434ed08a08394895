package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

// pingConfig pings often and gives a ping long enough on a loaded machine:
// the tests wait for outcomes, never for these to pass.
var pingConfig = Config{PingInterval: 20 * time.Millisecond, PingTimeout: time.Second}

// stopPlugin stops the plugin's process with SIGSTOP, as a hung plugin
// would be: alive, its connection open, answering nothing. The host kills
// it (SIGKILL ends a stopped process); if the test fails first, it is
// resumed so that clean-up does not wait on it.
func stopPlugin(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	// kill(2) returns before the signal is delivered: on a loaded machine
	// the plugin could still answer the test's next call, which then
	// never finds it hung.
	testutil.Eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		i := strings.LastIndexByte(string(b), ')')
		if f := strings.Fields(string(b[i+1:])); len(f) > 0 && (f[0] == "T" || f[0] == "t") {
			return nil
		}
		return fmt.Errorf("process %d not stopped yet", pid)
	})
}

// callLong makes a call with a deadline ten minutes away in the
// background: only the health ping can end it soon.
func callLong(h *Host, tool, input string, progress func(done, total int64)) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := h.Call(context.Background(), CallRequest{Tool: tool, Input: json.RawMessage(input),
			IdempotencyKey: tool, Deadline: time.Now().Add(10 * time.Minute), Progress: progress})
		done <- err
	}()
	return done
}

func wantHung(t *testing.T, done <-chan error, b *bundle, oldPid int) {
	t.Helper()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the call to the stopped plugin did not end: nothing noticed it hung")
	}
	te := wantKind(t, err, KindCrashed)
	if !strings.Contains(te.Message, "health ping") {
		t.Errorf("message %q does not say the plugin missed its health ping", te.Message)
	}
	if !IsRetryable(err) {
		t.Error("a hung plugin's call is not retryable: an idempotent tool could not be retried")
	}
	processEnded(t, oldPid)
	// The next call relaunches the plugin and succeeds.
	if res := mustCall(t, b.h, "testkit.echo", `{"after":"hang"}`); string(res.Output) != `{"after":"hang"}` {
		t.Fatalf("echo after the relaunch answered %s", res.Output)
	}
	wantRelaunchedOnce(t, b.h, oldPid)
}

// wantRelaunchedOnce checks that testkit, which ran as process old, was
// launched once more since, as another process.
func wantRelaunchedOnce(t *testing.T, h *Host, old int) {
	t.Helper()
	if n := launches(h, "testkit"); n != 2 {
		t.Fatalf("%d launches, want the first and one relaunch", n)
	}
	if p := pid(h, "testkit"); p == old || p == 0 {
		t.Fatalf("plugin pid %d after the relaunch, was %d", p, old)
	}
}

// TestHungPluginKilledByHealthPing: a plugin stopped (SIGSTOP) while an
// idempotent call runs on it fails that call as a crash, retryable, long
// before its deadline, and is relaunched for the next call.
func TestHungPluginKilledByHealthPing(t *testing.T) {
	t.Parallel()
	b := setup(t, pingConfig, "testkit")
	started := make(chan struct{}, 1)
	done := callLong(b.h, "testkit.sleep", `{"ms":600000}`, func(int64, int64) {
		select {
		case started <- struct{}{}:
		default:
		}
	})
	select {
	case <-started: // the plugin is running the call
	case err := <-done:
		t.Fatalf("the call ended before it started: %v", err)
	}
	old := pid(b.h, "testkit")
	stopPlugin(t, old)
	wantHung(t, done, b, old)
}

// TestHungPluginAtMostOnceCallEndsAsACrash: the same for a
// non-idempotent tool (testkit.exclusive): its call ends as a crash, which
// the engine records as E_TOOL_CRASHED and does not retry.
func TestHungPluginAtMostOnceCallEndsAsACrash(t *testing.T) {
	t.Parallel()
	b := setup(t, pingConfig, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`) // launched
	old := pid(b.h, "testkit")
	inst := b.h.set.Load().plugins["testkit"].inst
	done := callLong(b.h, "testkit.exclusive", `{"ms":600000}`, nil)
	testutil.Eventually(t, time.Minute, func() error {
		if inst.inFlight.Load() == 0 {
			return fmt.Errorf("the call is not in flight yet")
		}
		return nil
	})
	stopPlugin(t, old)
	wantHung(t, done, b, old)
}

// TestIdleHungPluginFailsItsNextCall: the finding as reported: the idle
// plugin is stopped, and the next call to it ends at once instead of at
// its deadline. A health ping the first call started may still be
// waiting for its answer when the plugin stops: then the plugin is found
// hung before the next call is dispatched, and that call runs on the
// relaunched process. Either way the stopped process is killed and the
// call does not wait for its deadline.
func TestIdleHungPluginFailsItsNextCall(t *testing.T) {
	t.Parallel()
	b := setup(t, pingConfig, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`)
	old := pid(b.h, "testkit")
	stopPlugin(t, old)
	var err error
	select {
	case err = <-callLong(b.h, "testkit.echo", `{}`, nil):
	case <-time.After(time.Minute):
		t.Fatal("the call to the stopped plugin did not end: nothing noticed it hung")
	}
	if err != nil {
		ended := make(chan error, 1)
		ended <- err
		wantHung(t, ended, b, old)
		return
	}
	// Found hung by the first call's ping, before this call was sent.
	processEnded(t, old)
	wantRelaunchedOnce(t, b.h, old)
}

// TestHealthPingDoesNotQueueBehindCalls: with every slot of the plugin
// held by a call that blocks its goroutine (testkit.hang), the pings are
// still answered: no call is failed and nothing is relaunched.
func TestHealthPingDoesNotQueueBehindCalls(t *testing.T) {
	t.Parallel()
	cfg := pingConfig
	cfg.PerPluginConcurrency = 3
	b := setup(t, cfg, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`)
	inst := b.h.set.Load().plugins["testkit"].inst
	pings := func() int64 { return inst.pings.Load() }
	before := pings()
	var dones []<-chan error
	for range 3 {
		dones = append(dones, callLong(b.h, "testkit.hang", `{"ms":400}`, nil))
	}
	for _, d := range dones {
		if err := <-d; err != nil {
			t.Fatalf("a call failed while the plugin was busy: %v", err)
		}
	}
	if pings() == before {
		t.Fatal("no ping was made while the calls were in flight")
	}
	if n := launches(b.h, "testkit"); n != 1 {
		t.Fatalf("%d launches: a busy plugin was taken for a hung one", n)
	}
}

// TestSetPing: the ping's settings change at run time (a config reload).
func TestSetPing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	if got := time.Duration(b.h.pingInterval.Load()); got != defaultPingInterval {
		t.Fatalf("default interval %v", got)
	}
	b.h.SetPing(time.Second, 2*time.Second)
	if time.Duration(b.h.pingInterval.Load()) != time.Second || time.Duration(b.h.pingTimeout.Load()) != 2*time.Second {
		t.Fatal("SetPing did not apply")
	}
	b.h.SetPing(0, -1)
	if time.Duration(b.h.pingInterval.Load()) != defaultPingInterval || time.Duration(b.h.pingTimeout.Load()) != defaultPingTimeout {
		t.Fatal("SetPing(0, -1) did not restore the defaults")
	}
}
