package host

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/sdk/wire"
)

func call(t *testing.T, h *Host, tool, input string) (*CallResult, error) {
	t.Helper()
	return h.Call(context.Background(), CallRequest{Tool: tool, Input: json.RawMessage(input), IdempotencyKey: t.Name()})
}

func mustCall(t *testing.T, h *Host, tool, input string) *CallResult {
	t.Helper()
	res, err := call(t, h, tool, input)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func wantKind(t *testing.T, err error, kind Kind) *ToolError {
	t.Helper()
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("got error %v (%T), want a *ToolError of kind %s", err, err, kind)
	}
	if te.Kind != kind {
		t.Fatalf("got kind %s (%v), want %s", te.Kind, err, kind)
	}
	return te
}

// pid returns the pid of the plugin's running instance, or 0.
func pid(h *Host, plugin string) int {
	p := h.set.Load().plugins[plugin]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inst == nil {
		return 0
	}
	return p.inst.pid()
}

func launches(h *Host, plugin string) int64 {
	p := h.set.Load().plugins[plugin]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.launches
}

// processGone waits until pid no longer exists (go-plugin reaps it).
func processGone(t *testing.T, pid int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("process %d still alive", pid)
		}
		return nil
	})
}

func TestInstallPinsAndCachesManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := Install(dir, testutil.Plugin(t, "testkit"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "testkit" || m.ProtocolVersion != wire.ProtocolVersion {
		t.Fatalf("manifest %+v", m)
	}
	sum, err := FileSHA256(testutil.Plugin(t, "testkit"))
	if err != nil {
		t.Fatal(err)
	}
	pins, err := ReadPins(dir)
	if err != nil {
		t.Fatal(err)
	}
	if pins["testkit"].SHA256 != sum {
		t.Fatalf("pin %+v, want sha256 %s", pins["testkit"], sum)
	}
	if got, _ := FileSHA256(filepath.Join(dir, "testkit")); got != sum {
		t.Fatalf("installed copy has sha256 %s, want %s", got, sum)
	}
	if c := readManifestCache(dir, "testkit", sum, ""); c == nil || len(c.Tools) != len(m.Tools) {
		t.Fatalf("manifest cache %+v", c)
	}
	// Installing in place (what make build does) keeps the pin.
	if _, err := Install(dir, filepath.Join(dir, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	if pins, _ := ReadPins(dir); pins["testkit"].SHA256 != sum {
		t.Fatalf("in-place install changed the pin: %+v", pins)
	}
	if un, _ := Unpinned(dir); len(un) != 0 {
		t.Fatalf("unpinned files after install: %v", un)
	}
}

func TestHandshakeAndEcho(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	in := `{"hello":"world","n":[1,2,3]}`
	res := mustCall(t, b.h, "testkit.echo", in)
	if string(res.Output) != in {
		t.Fatalf("echo answered %s, want %s", res.Output, in)
	}
	info, ok := b.h.LookupTool("testkit.exclusive")
	if !ok || info.Idempotent {
		t.Fatalf("LookupTool(testkit.exclusive) = %+v, %v; want a non-idempotent tool", info, ok)
	}
	info, ok = b.h.LookupTool("testkit.sleep")
	if !ok || !info.Idempotent || !strings.Contains(string(info.InputSchema), `"ms"`) {
		t.Fatalf("LookupTool(testkit.sleep) = %+v, %v", info, ok)
	}
	if _, ok := b.h.LookupTool("testkit.nope"); ok {
		t.Fatal("LookupTool found a tool that does not exist")
	}
	if n := len(b.h.Tools()); n < 10 {
		t.Fatalf("Tools() has %d tools", n)
	}
}

func TestUnknownTool(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	_, err := call(t, b.h, "testkit.nope", `{}`)
	wantKind(t, err, KindUnknownTool)
	_, err = call(t, b.h, "other.echo", `{}`)
	wantKind(t, err, KindUnknownTool)
}

func TestVersionRefusedAtInstall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Install(dir, testutil.Plugin(t, "badversion"), nil)
	te := wantKind(t, err, KindProtocol)
	if !strings.Contains(te.Message, "incompatible API version") || !strings.Contains(te.Message, "99") {
		t.Fatalf("message %q does not name the version", te.Message)
	}
	if pins, _ := ReadPins(dir); len(pins) != 0 {
		t.Fatalf("refused plugin was pinned: %v", pins)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != lockFile {
			t.Fatalf("refused install left %s behind", e.Name())
		}
	}
}

// pinnedByHand installs the test plugin plugin as name by hand: copied,
// pinned and its manifest cached (one idempotent tool, name.x) without
// the install's checks, so only launching it can refuse it. It answers a
// host over that plugins directory.
func pinnedByHand(t *testing.T, plugin, name string) *Host {
	t.Helper()
	dir, data := t.TempDir(), t.TempDir()
	tmp, sum, err := copyHashed(dir, testutil.Plugin(t, plugin))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	hexSum := encodeSum(sum)
	if err := writePins(dir, map[string]Pin{name: {SHA256: hexSum}}); err != nil {
		t.Fatal(err)
	}
	if err := writeManifestCache(dir, &PluginManifest{Name: name, SHA256: hexSum, ProtocolVersion: wire.ProtocolVersion,
		Tools: []ToolManifest{{Name: name + ".x", Idempotent: true, Effect: flows.EffectIdempotent}}}); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{PluginsDir: dir, DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestVersionRefusedAtLaunch(t *testing.T) {
	t.Parallel()
	// A binary pinned and cached by hand (as if it had been replaced by a
	// newer build with the same pin): the host still refuses it at launch.
	h := pinnedByHand(t, "badversion", "bad")
	defer h.Close()
	_, err := call(t, h, "bad.x", `{}`)
	wantKind(t, err, KindProtocol)
}

func TestInstallRefusesNonPlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(t.TempDir(), "hello")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Install(dir, script, nil)
	if err == nil {
		t.Fatal("a shell script was installed as a plugin")
	}
	wantKind(t, err, KindProtocol)
}

func TestChecksumRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	bin := filepath.Join(b.pluginsDir, "testkit")
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("tampered"))
	f.Close()
	_, err = call(t, b.h, "testkit.echo", `{}`)
	te := wantKind(t, err, KindChecksum)
	if !strings.Contains(te.Message, "pinned") {
		t.Fatalf("message %q", te.Message)
	}
	if n := launches(b.h, "testkit"); n != 0 {
		t.Fatalf("tampered binary launched %d times", n)
	}
	// The catalog still resolves the tools from the cache by the pinned
	// checksum; Verify tells the binary no longer matches.
	cat, err := LoadCatalog(b.pluginsDir, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.LookupTool("testkit.echo"); !ok {
		t.Fatal("catalog lost testkit.echo")
	}
	wantKind(t, cat.Plugins()[0].Verify(), KindChecksum)
}

func TestUnpinnedBinaryIsNotLaunched(t *testing.T) {
	t.Parallel()
	dir, data := t.TempDir(), t.TempDir()
	tmp, _, err := copyHashed(dir, testutil.Plugin(t, "testkit"))
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(tmp, filepath.Join(dir, "testkit"))
	un, err := Unpinned(dir)
	if err != nil || len(un) != 1 || un[0] != "testkit" {
		t.Fatalf("Unpinned = %v, %v", un, err)
	}
	h, err := New(Config{PluginsDir: dir, DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if len(h.Tools()) != 0 {
		t.Fatalf("an unpinned binary contributed tools: %v", h.Tools())
	}
	_, err = call(t, h, "testkit.echo", `{}`)
	wantKind(t, err, KindUnknownTool)
}

func TestSchemaRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	for _, in := range []string{`{"ms":"soon"}`, `{}`, `{"ms":1,"extra":true}`, `{"ms":`, `[1]`} {
		_, err := call(t, b.h, "testkit.sleep", in)
		wantKind(t, err, KindSchema)
	}
	_, err := call(t, b.h, "testkit.echo", `{"a":1} trailing`)
	wantKind(t, err, KindSchema)
	if n := launches(b.h, "testkit"); n != 0 {
		t.Fatalf("refused input reached the plugin: %d launches", n)
	}
}

func TestInputTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxMessageBytes: 1 << 10}, "testkit")
	_, err := call(t, b.h, "testkit.echo", `"`+strings.Repeat("x", 2<<10)+`"`)
	wantKind(t, err, KindTooLarge)
}

func readCancelled(t *testing.T, b *bundle) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(b.dataDir, "plugin-state", "testkit", "cancelled.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestDeadlineReachesPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{CancelGrace: 5 * time.Second}, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`) // launch first: time only the call
	start := time.Now()
	_, err := b.h.Call(context.Background(), CallRequest{
		Tool: "testkit.sleep", Input: json.RawMessage(`{"ms":20000}`), IdempotencyKey: "deadline-1",
		Deadline: time.Now().Add(300 * time.Millisecond),
	})
	elapsed := time.Since(start)
	wantKind(t, err, KindDeadline)
	if elapsed < 300*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("deadline of 300ms returned after %v", elapsed)
	}
	recs := readCancelled(t, b)
	if len(recs) != 1 || recs[0]["idempotency_key"] != "deadline-1" {
		t.Fatalf("plugin's ctx was not cancelled: %v", recs)
	}
	// The plugin acknowledged: it was not killed.
	mustCall(t, b.h, "testkit.echo", `{}`)
	if r := b.h.Restarts()["testkit"]; r != 0 {
		t.Fatalf("%d restarts after a well-behaved deadline", r)
	}
}

func TestDefaultTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DefaultTimeout: 200 * time.Millisecond}, "testkit")
	_, err := call(t, b.h, "testkit.sleep", `{"ms":20000}`)
	wantKind(t, err, KindDeadline)
}

func TestCancellationReachesPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{CancelGrace: 5 * time.Second}, "testkit")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	start := time.Now()
	_, err := b.h.Call(ctx, CallRequest{
		Tool: "testkit.sleep", Input: json.RawMessage(`{"ms":20000}`), IdempotencyKey: "cancel-1",
		// The first progress report proves the plugin is running the call.
		Progress: func(done, total int64) { once.Do(cancel) },
	})
	wantKind(t, err, KindCancelled)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("cancel took %v", elapsed)
	}
	recs := readCancelled(t, b)
	if len(recs) != 1 || recs[0]["idempotency_key"] != "cancel-1" || recs[0]["reason"] != "context canceled" {
		t.Fatalf("cancellation did not reach the plugin's ctx: %v", recs)
	}
	if r := b.h.Restarts()["testkit"]; r != 0 {
		t.Fatalf("plugin restarted %d times after acknowledging a cancel", r)
	}
}

func TestHangKilledAtDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{CancelGrace: 200 * time.Millisecond, RestartBackoff: 10 * time.Millisecond}, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`)
	old := pid(b.h, "testkit")
	start := time.Now()
	_, err := b.h.Call(context.Background(), CallRequest{
		Tool: "testkit.hang", Input: json.RawMessage(`{"ms":60000}`),
		Deadline: time.Now().Add(200 * time.Millisecond),
	})
	elapsed := time.Since(start)
	te := wantKind(t, err, KindDeadline)
	if !strings.Contains(te.Message, "killed") {
		t.Fatalf("message %q does not say the plugin was killed", te.Message)
	}
	if elapsed > 3*time.Second {
		t.Fatalf("hung call returned after %v", elapsed)
	}
	processGone(t, old)
	mustCall(t, b.h, "testkit.echo", `{}`)
	if p := pid(b.h, "testkit"); p == old || p == 0 {
		t.Fatalf("plugin not relaunched: pid %d, old %d", p, old)
	}
	if r := b.h.Restarts()["testkit"]; r != 1 {
		t.Fatalf("Restarts = %d, want 1", r)
	}
}

func TestCrashRestartsWithBackoff(t *testing.T) {
	t.Parallel()
	const backoff = 400 * time.Millisecond
	b := setup(t, Config{RestartBackoff: backoff}, "testkit", "mail")
	mustCall(t, b.h, "mail.send", `{"to":"a@example.com","body":"hi"}`)
	mustCall(t, b.h, "testkit.echo", `{}`)
	mailPID, oldPID := pid(b.h, "mail"), pid(b.h, "testkit")

	_, err := call(t, b.h, "testkit.crash", `{}`)
	wantKind(t, err, KindCrashed)
	if !IsRetryable(err) {
		t.Fatalf("crash is not retryable: %v", err)
	}
	crashed := time.Now()
	processGone(t, oldPID)

	mustCall(t, b.h, "testkit.echo", `{"after":"crash"}`)
	if waited := time.Since(crashed); waited < backoff/2 {
		t.Fatalf("restarted after %v, before the backoff of %v", waited, backoff)
	}
	if r := b.h.Restarts(); r["testkit"] != 1 || r["mail"] != 0 {
		t.Fatalf("Restarts = %v, want testkit 1, mail 0", r)
	}
	if p := pid(b.h, "mail"); p != mailPID {
		t.Fatalf("mail plugin touched by testkit's crash: pid %d -> %d", mailPID, p)
	}
	mustCall(t, b.h, "mail.send", `{"to":"a@example.com","body":"still here"}`)
}

// A plugin that died while idle (killed by the OOM killer, say) is
// relaunched before the next call is dispatched: the call succeeds, and
// the death costs no restart backoff since no call was lost.
func TestIdleDeathRelaunchedBeforeDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RestartBackoff: time.Hour}, "testkit")
	for round := 1; round <= 2; round++ {
		mustCall(t, b.h, "testkit.echo", `{}`)
		old := pid(b.h, "testkit")
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		processGone(t, old)
		res := mustCall(t, b.h, "testkit.echo", `{"after":"idle death"}`)
		if !strings.Contains(string(res.Output), "idle death") {
			t.Fatalf("round %d: answer %s", round, res.Output)
		}
		if p := pid(b.h, "testkit"); p == old || p == 0 {
			t.Fatalf("round %d: the call went to pid %d, the dead one was %d", round, p, old)
		}
		if n := launches(b.h, "testkit"); n != int64(round+1) {
			t.Fatalf("round %d: %d launches, want %d", round, n, round+1)
		}
	}
}

func TestCrashBackoffPastDeadlineFailsFast(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RestartBackoff: time.Minute}, "testkit")
	_, err := call(t, b.h, "testkit.crash", `{}`)
	wantKind(t, err, KindCrashed)
	start := time.Now()
	_, err = b.h.Call(context.Background(), CallRequest{Tool: "testkit.echo", Deadline: time.Now().Add(time.Second)})
	// The call never reached a process: not sent, so even an at-most-once
	// tool may be called again.
	te := wantKind(t, err, KindNotSent)
	if !strings.Contains(te.Message, "restarts in") || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("got %v after %v; want an immediate refusal", err, time.Since(start))
	}
	_, err = b.h.Call(context.Background(), CallRequest{Tool: "testkit.once", Input: json.RawMessage(`{"value":1}`), IdempotencyKey: "k-backoff", Attempt: 1, Deadline: time.Now().Add(time.Second)})
	wantKind(t, err, KindNotSent)
	if !IsRetryable(err) {
		t.Fatalf("a call refused in the backoff is not retryable: %v", err)
	}
}

func TestOversizedAnswerRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxMessageBytes: 1 << 20}, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`)
	before := pid(b.h, "testkit")
	_, err := call(t, b.h, "testkit.flood", `{"bytes":33554432}`) // 32 MiB
	wantKind(t, err, KindTooLarge)
	// Just under the limit passes; the host and the plugin go on.
	res := mustCall(t, b.h, "testkit.flood", `{"bytes":1000000}`)
	if len(res.Output) != 1000002 {
		t.Fatalf("flood of 1e6 bytes answered %d bytes", len(res.Output))
	}
	if after := pid(b.h, "testkit"); after != before {
		t.Fatalf("plugin restarted (%d -> %d) after an oversized answer", before, after)
	}
}

func TestNonIdempotentToolIsSerialized(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{PerPluginConcurrency: 16}, "testkit")
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	peaks := make(chan float64, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.exclusive", Input: json.RawMessage(`{"ms":15}`)})
			if err != nil {
				errs <- err
				return
			}
			var out struct{ Peak float64 }
			json.Unmarshal(res.Output, &out)
			peaks <- out.Peak
		}()
	}
	wg.Wait()
	close(errs)
	close(peaks)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	for p := range peaks {
		n++
		if p != 1 {
			t.Fatalf("the plugin saw %v calls of a non-idempotent tool in flight at once", p)
		}
	}
	if n != callers {
		t.Fatalf("%d answers, want %d", n, callers)
	}
}

func TestIdempotentToolsRunConcurrentlyUpToLimit(t *testing.T) {
	t.Parallel()
	const limit = 4
	b := setup(t, Config{PerPluginConcurrency: limit}, "testkit")
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := 0.0
	for i := range 3 * limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.sleep", Input: json.RawMessage(`{"ms":300}`), IdempotencyKey: string(rune('a' + i))})
			if err != nil {
				t.Error(err)
				return
			}
			var out struct{ Peak float64 }
			json.Unmarshal(res.Output, &out)
			mu.Lock()
			peak = max(peak, out.Peak)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if peak != limit {
		t.Fatalf("peak of %v concurrent idempotent calls, want exactly the limit %d", peak, limit)
	}
}

func TestFailCountSurvivesRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RestartBackoff: time.Millisecond}, "testkit")
	req := CallRequest{Tool: "testkit.fail", Input: json.RawMessage(`{"times":2}`), IdempotencyKey: "logical-call-1"}
	for attempt := 1; attempt <= 3; attempt++ {
		req.Attempt = attempt
		res, err := b.h.Call(context.Background(), req)
		if attempt <= 2 {
			wantKind(t, err, KindRetryable)
			if !IsRetryable(err) {
				t.Fatal("retryable failure not retryable")
			}
			if attempt == 1 {
				_, err := call(t, b.h, "testkit.crash", `{}`)
				wantKind(t, err, KindCrashed)
			}
			continue
		}
		if err != nil {
			t.Fatalf("attempt 3: %v", err)
		}
		if string(res.Output) != `{"attempts":3}` {
			t.Fatalf("attempt 3 answered %s", res.Output)
		}
	}
	if r := b.h.Restarts()["testkit"]; r != 1 {
		t.Fatalf("Restarts = %d, want 1", r)
	}
	// Another logical call has its own count.
	_, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.fail", Input: json.RawMessage(`{"times":1}`), IdempotencyKey: "logical-call-2"})
	wantKind(t, err, KindRetryable)
}

// TestToolErrorCodeAndRetryAfter: the code and retry-after a tool gives its
// error cross the process boundary intact, and show in the message.
func TestToolErrorCodeAndRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	_, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.fail", IdempotencyKey: "k1",
		Input: json.RawMessage(`{"times":1,"code":"E_MODEL_RATE","retry_after_ms":1500}`)})
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v is not a *ToolError", err)
	}
	if te.Kind != KindRetryable || te.Code != "E_MODEL_RATE" || te.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("got kind %s code %q retry-after %v, want retryable E_MODEL_RATE 1.5s", te.Kind, te.Code, te.RetryAfter)
	}
	if want := "testkit.fail: retryable: E_MODEL_RATE: attempt 1 of 1 planned failures (retry after 1.5s)"; te.Error() != want {
		t.Fatalf("message %q, want %q", te.Error(), want)
	}
	// A code the protocol does not allow is the tool's mistake, reported
	// as a permanent error that names it.
	_, err = b.h.Call(context.Background(), CallRequest{Tool: "testkit.fail", IdempotencyKey: "k2",
		Input: json.RawMessage(`{"times":1,"code":"rate limited"}`)})
	wantKind(t, err, KindPermanent)
	if !strings.Contains(err.Error(), "malformed error code") {
		t.Fatalf("message %q does not name the bad code", err)
	}
}

func TestProgressAndCost(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	var reports [][2]int64
	_, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.sleep", Input: json.RawMessage(`{"ms":200}`),
		Progress: func(done, total int64) { reports = append(reports, [2]int64{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	// What arrives is this call's, in order, the last one before the
	// result.
	if len(reports) < 2 || reports[len(reports)-1] != [2]int64{200, 200} {
		t.Fatalf("progress reports %v", reports)
	}
	for i, r := range reports {
		if r[1] != 200 || r[0] > 200 || (i > 0 && r[0] < reports[i-1][0]) {
			t.Fatalf("progress reports out of order or foreign: %v", reports)
		}
	}
	res := mustCall(t, b.h, "testkit.cost", `{"cost":7}`)
	if res.Cost != 7 || !res.CostReported {
		t.Fatalf("reported cost: %+v", res)
	}
	res = mustCall(t, b.h, "testkit.echo", `{}`)
	if res.Cost != 0 || res.CostReported {
		t.Fatalf("echo cost: %+v", res)
	}
	if info, _ := b.h.LookupTool("testkit.cost"); info.Cost != 5 {
		t.Fatalf("declared cost %d, want 5", info.Cost)
	}
}

func TestStateDirConfigAndLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{PluginConfig: map[string]json.RawMessage{"testkit": json.RawMessage(`{"answer":42}`)}}, "testkit")
	res := mustCall(t, b.h, "testkit.env", `{}`)
	var env struct {
		Name     string
		StateDir string `json:"state_dir"`
		Config   map[string]any
	}
	if err := json.Unmarshal(res.Output, &env); err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(b.dataDir, "plugin-state", "testkit")
	if env.Name != "testkit" || env.StateDir != wantDir || env.Config["answer"] != 42.0 {
		t.Fatalf("plugin launched with %+v; want state dir %s and config answer 42", env, wantDir)
	}
	if st, err := os.Stat(wantDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v %v", st, err)
	}
	mustCall(t, b.h, "testkit.log", `{"message":"hello from the plugin"}`)
	testutil.Eventually(t, 30*time.Second, func() error {
		logs := b.logs.String()
		// The tool's slog record arrives as a record of its own level with
		// its attributes, not as the JSON line the plugin wrote.
		var record bool
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "[WARN]") && strings.Contains(line, "weir.plugin.testkit: hello from the plugin:") &&
				strings.Contains(line, "tool=testkit.log") && strings.Contains(line, "key=") && !strings.Contains(line, `"msg"`) {
				record = true
			}
		}
		if record && strings.Contains(logs, "stderr: hello from the plugin") {
			return nil
		}
		return fmt.Errorf("plugin log lines not under weir.plugin.testkit:\n%s", logs)
	})
}

// What a plugin prints reaches the log escaped and cut: NUL, 0xFF and an
// escape sequence on its stdout appear as escapes, and a 1 MiB stderr
// line without a break is logged as its first MaxPluginLogLine bytes
// and a count of the rest.
func TestPluginOutputEscapedAndCut(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	const long = 1 << 20
	mustCall(t, b.h, "testkit.spew", fmt.Sprintf(`{"stdout_hex":"6265666f726500ff1b5b324a6166746572","stderr_bytes":%d}`, long))
	testutil.Eventually(t, 30*time.Second, func() error {
		logs := b.logs.String()
		if !strings.Contains(logs, `before\u0000\xff\u001b[2Jafter`) || !strings.Contains(logs, "dropped_bytes") {
			return fmt.Errorf("the plugin's output is not logged escaped and cut:\n%.2000s", logs)
		}
		return nil
	})
	logs := b.logs.String()
	if strings.ContainsAny(logs, "\x00\x1b") || strings.Contains(logs, "\xff") {
		t.Errorf("raw control bytes in the log")
	}
	for _, line := range strings.Split(logs, "\n") {
		if len(line) > MaxPluginLogLine+512 {
			t.Fatalf("a log line of %d bytes, more than MaxPluginLogLine (%d) and its prefix", len(line), MaxPluginLogLine)
		}
	}
	if n := strings.Count(logs, strings.Repeat("x", 1024)); n == 0 || n > 2*MaxPluginLogLine/1024 {
		t.Errorf("%d KiB of the long line logged; want at most %d", n, MaxPluginLogLine/1024)
	}
}

func TestCloseFailsCallsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`)
	p := pid(b.h, "testkit")
	errc := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := b.h.Call(context.Background(), CallRequest{Tool: "testkit.sleep", Input: json.RawMessage(`{"ms":30000}`),
			Progress: func(int64, int64) { once.Do(func() { close(started) }) }})
		errc <- err
	}()
	<-started
	if err := b.h.Close(); err != nil {
		t.Fatal(err)
	}
	wantKind(t, <-errc, KindCancelled)
	processGone(t, p)
	_, err := call(t, b.h, "testkit.echo", `{}`)
	wantKind(t, err, KindCancelled)
}

func TestLoadCatalogUsesCacheWithoutLaunching(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit", "mail")
	cat, err := LoadCatalog(b.pluginsDir, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := cat.LookupTool("mail.send")
	if !ok || info.Idempotent {
		t.Fatalf("mail.send: %+v %v", info, ok)
	}
	// Make the binary unlaunchable: the catalog must not need it.
	if err := os.WriteFile(filepath.Join(b.pluginsDir, "mail"), []byte("not a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err = LoadCatalog(b.pluginsDir, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.LookupTool("mail.send"); !ok {
		t.Fatal("catalog launched mail instead of reading its cached manifest")
	}
	// Without the cache, the plugin is launched once and the cache
	// rebuilt.
	if err := os.RemoveAll(filepath.Join(b.pluginsDir, ManifestDir)); err != nil {
		t.Fatal(err)
	}
	cat, err = LoadCatalog(b.pluginsDir, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.LookupTool("testkit.echo"); !ok {
		t.Fatal("testkit.echo missing after rebuilding the cache")
	}
	var mailInfo PluginInfo
	for _, p := range cat.Plugins() {
		if p.Name == "mail" {
			mailInfo = p
		}
	}
	wantKind(t, mailInfo.Err, KindChecksum)
	if _, ok := cat.LookupTool("mail.send"); ok {
		t.Fatal("a broken plugin without cache contributed tools")
	}
	sum, _ := FileSHA256(testutil.Plugin(t, "testkit"))
	if readManifestCache(b.pluginsDir, "testkit", sum, "") == nil {
		t.Fatal("manifest cache not rebuilt")
	}
}

// TestPluginEnvAndMemoryMax: a block's env reaches its plugin alone, and
// memory_max is the launched process's RLIMIT_DATA.
func TestPluginEnvAndMemoryMax(t *testing.T) {
	t.Setenv("WEIR_TEST_MINE", "for-testkit")
	t.Setenv("WEIR_TEST_OTHERS", "for-mail")
	b := setup(t, Config{
		PluginEnv:       map[string][]string{"testkit": {"WEIR_TEST_MINE"}, "mail": {"WEIR_TEST_OTHERS"}},
		PluginMemoryMax: map[string]int64{"testkit": 256 << 20},
	}, "testkit", "mail")
	res := mustCall(t, b.h, "testkit.env", `{"vars":["WEIR_TEST_MINE","WEIR_TEST_OTHERS"]}`)
	var env struct {
		PID  int `json:"pid"`
		Vars map[string]string
	}
	if err := json.Unmarshal(res.Output, &env); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"WEIR_TEST_MINE": "for-testkit"}; !reflect.DeepEqual(env.Vars, want) {
		t.Errorf("testkit sees %v, want %v", env.Vars, want)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", env.PID))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(l, "Max data size") {
			line = l
		}
	}
	if f := strings.Fields(line); len(f) < 5 || f[3] != "268435456" || f[4] != "268435456" {
		t.Errorf("RLIMIT_DATA of the plugin: %q, want 268435456 soft and hard", line)
	}
	if strings.Contains(b.logs.String(), "for-testkit") {
		t.Error("a variable's value reached the log")
	}
}
