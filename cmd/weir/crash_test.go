package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// binaries returns the weir binary built from this tree and a plugins
// directory in which it pinned the testkit and mail plugins, both made
// once per test binary and shared: the daemons only read it.
func binaries(t *testing.T) (weir, plugins string) {
	t.Helper()
	return testutil.WeirBinary(t), testutil.PinnedPlugins(t)
}

// daemon is a `weir serve` process under test.
type daemon struct {
	t       *testing.T
	weir    string
	plugins string // pinned, shared with the other daemons
	data    string
	socket  string
	cmd     *exec.Cmd
	exited  chan error
	logs    *testutil.Buffer
	api     *client.Client
	// serveArgs are added to weir serve's arguments (--config FILE).
	serveArgs []string
	// config, if set, is the daemon's config file (HCL) content, given
	// with --config.
	config string
}

func newDaemon(t *testing.T) *daemon {
	weir, plugins := binaries(t)
	data := t.TempDir()
	sock := filepath.Join(testutil.SocketDir(t), "s")
	d := &daemon{t: t, weir: weir, plugins: plugins, data: data, socket: sock, logs: &testutil.Buffer{}, api: client.NewUnix(sock)}
	t.Cleanup(d.api.Close)
	return d
}

// e2e marks a test that starts real processes: it is skipped with -short,
// saying what it would start, and runs in parallel with the others.
func e2e(t *testing.T, starts string) {
	t.Helper()
	if testing.Short() {
		t.Skip(starts)
	}
	t.Parallel()
}

// servingDaemon is the daemon of an e2e test that needs one serving with
// no failpoints armed and nothing else set before it starts.
func servingDaemon(t *testing.T) *daemon {
	t.Helper()
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	d.start("")
	return d
}

// env is what a weir command needs to reach this daemon.
func (d *daemon) env() map[string]string {
	return map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data}
}

// cli runs a weir command in-process against this daemon and returns its
// exit code, stdout and stderr.
func (d *daemon) cli(args ...string) (int, string, string) {
	d.t.Helper()
	code, out, errb, _ := run(d.t, d.env(), args...)
	return code, out, errb
}

// start runs weir serve with the failpoints armed and waits until it
// answers on its socket.
func (d *daemon) start(failpoints string, env ...string) {
	d.t.Helper()
	d.spawn(failpoints, env...)
	d.waitServing()
}

// startToDie runs weir serve with a failpoint that must kill it, and waits
// for that SIGKILL. The failpoint may fire while the daemon recovers,
// before it ever answers (recovery resumes the work that hits it), so
// nothing is asked of it first.
func (d *daemon) startToDie(failpoints string) {
	d.t.Helper()
	d.spawn(failpoints)
	d.waitKilled()
}

// spawn starts the weir serve process with the failpoints armed.
func (d *daemon) spawn(failpoints string, env ...string) {
	d.t.Helper()
	args := []string{"--data", d.data, "--plugins", d.plugins, "--socket", d.socket, "serve", "--log-level", "debug", "--grace", "5s"}
	if d.config != "" {
		cfg := filepath.Join(d.t.TempDir(), "weir.hcl")
		if err := os.WriteFile(cfg, []byte(d.config), 0o600); err != nil {
			d.t.Fatal(err)
		}
		args = append(args, "--config", cfg)
	}
	d.cmd = exec.Command(d.weir, append(args, d.serveArgs...)...)
	d.cmd.Env = append(append(os.Environ(), "WEIR_FAILPOINT="+failpoints), env...)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.logs.Write([]byte(sc.Text() + "\n"))
		}
		d.exited <- d.cmd.Wait()
	}()
	d.t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
}

// waitServing waits until the daemon answers on its socket with admission
// open.
func (d *daemon) waitServing() {
	d.t.Helper()
	testutil.Eventually(d.t, 30*time.Second, func() error {
		st, err := d.api.Health(context.Background())
		if err == nil && !st.Open() {
			err = fmt.Errorf("admission %s", st.Admission)
		}
		if err != nil {
			return fmt.Errorf("daemon does not answer: %v\n%s", err, d.log())
		}
		return nil
	})
}

func (d *daemon) log() string {
	return d.logs.String()
}

// waitKilled waits for the process to die of SIGKILL (a failpoint firing).
func (d *daemon) waitKilled() {
	d.t.Helper()
	select {
	case err := <-d.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			d.t.Fatalf("daemon ended with %v, want SIGKILL from the failpoint\n%s", err, d.log())
		}
	case <-time.After(30 * time.Second):
		d.t.Fatalf("failpoint never fired\n%s", d.log())
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("daemon stop: %v\n%s", err, d.log())
		}
	case <-time.After(30 * time.Second):
		d.t.Fatalf("daemon did not stop\n%s", d.log())
	}
}

var tcpAddressRE = regexp.MustCompile(`serving on tcp: address=(127\.0\.0\.1:\d+)`)

// tokenClient is a client of the daemon's TCP listener (the address its
// latest start logged) with the token secret, closed with the test.
func (d *daemon) tokenClient(secret string) *client.Client {
	d.t.Helper()
	// The log arrives through a pipe: the line may come after the socket
	// answered.
	var m [][]string
	testutil.Eventually(d.t, 30*time.Second, func() error {
		if m = tcpAddressRE.FindAllStringSubmatch(d.log(), -1); m == nil {
			return fmt.Errorf("no tcp address in the daemon's log:\n%s", d.log())
		}
		return nil
	})
	c, err := client.New("http://"+m[len(m)-1][1], client.WithToken(secret))
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(c.Close)
	return c
}

func (d *daemon) register(src string) {
	d.t.Helper()
	if _, err := d.api.FlowRegister(context.Background(), apitypes.SourceFile{Path: "crash.star", Src: src}); err != nil {
		d.t.Fatalf("register: %v", err)
	}
}

func (d *daemon) startRun(flow, input, requestID string) (apitypes.StartResult, error) {
	res, err := d.api.RunStart(context.Background(), apitypes.StartRequest{Flow: flow, Input: json.RawMessage(input), RequestID: requestID})
	if err != nil {
		return apitypes.StartResult{}, err
	}
	return *res, nil
}

// runToEnd starts a run of flow (startRun) and waits until it has
// ended; a start refused fails the test.
func (d *daemon) runToEnd(flow, input, requestID string) (apitypes.StartResult, *apitypes.Run) {
	d.t.Helper()
	res, err := d.startRun(flow, input, requestID)
	if err != nil {
		d.t.Fatal(err)
	}
	return res, d.waitTerminal(res.RunID)
}

// waitTerminal waits until the run has ended.
func (d *daemon) waitTerminal(id string) *apitypes.Run {
	d.t.Helper()
	return d.runIs(id, "terminal", func(v *apitypes.Run) bool { return v.Phase.Terminal() })
}

func (d *daemon) events(id string) []apitypes.Event {
	d.t.Helper()
	evs, err := d.api.RunEvents(context.Background(), id, client.EventListParams{})
	if err != nil {
		d.t.Fatal(err)
	}
	return evs
}

// outbox counts the mails the mail plugin sent.
func (d *daemon) outbox() int { return d.stateLines("mail", "outbox.jsonl") }

// stateLines counts the lines of a log in the plugins' state directory
// (path under DATA/plugin-state): a plugin's own witness of its effects.
func (d *daemon) stateLines(path ...string) int {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{d.data, "plugin-state"}, path...)...))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

const crashFlow = `
flow(
    name = "crash",
    nodes = [
        task("prep", tool = "testkit.echo", args = lambda ctx: {"x": ctx.input["x"]}, next = "send"),
        task("send", tool = "mail.send", args = lambda ctx: {"to": "ops@example.com", "body": "hi"},
             at_most_once = True, next = "after", error = "unknown"),
        task("after", tool = "testkit.echo", args = lambda ctx: {"sent": True}),
        task("unknown", tool = "testkit.echo", args = lambda ctx: {"unknown": True}),
    ],
)

flow(
    name = "crash_blind",
    nodes = [
        task("prep", tool = "testkit.echo", args = lambda ctx: {"x": ctx.input["x"]}, next = "send"),
        task("send", tool = "testkit.once", args = lambda ctx: {"value": "hi", "probe": "unknown"},
             at_most_once = True, next = "after", error = "unknown"),
        task("after", tool = "testkit.echo", args = lambda ctx: {"sent": True}),
        task("unknown", tool = "testkit.echo", args = lambda ctx: {"unknown": True}),
    ],
)
`

// TestCrashAtEveryDurableBoundary kills the daemon with SIGKILL at each
// failpoint, restarts it, and checks that nothing accepted was lost, the
// run kept its id, owner and input, the at-most-once call ran at most
// once, and dedup still answers. An unknown outcome of mail.send is
// settled by its probe (the outbox knows each key): not sent, it is sent
// once; sent, the run goes on with its result. A tool whose probe cannot
// tell (crash_blind) leaves it E_OUTCOME_UNKNOWN.
func TestCrashAtEveryDurableBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real daemons")
	}
	// The failpoint names of runtime/internal/failpoint.
	tests := []crashCase{
		{"after-accept", `"sent":true`, 1, "", false},
		{"after-started", `"sent":true`, 1, "", false},
		{"after-tool" + "@2", `"sent":true`, 1, "", false},
		{"after-result" + "@2", `"sent":true`, 1, "", false},
		{"mid-finish", `"sent":true`, 1, "", false},
		{"after-started", `"unknown":true`, 0, engine.CodeOutcomeUnknown, true},
		{"after-tool" + "@2", `"unknown":true`, 1, engine.CodeOutcomeUnknown, true},
	}
	// On each store: the embedded one, and PostgreSQL (skipped, with the
	// reason, where it cannot be reached).
	for _, tt := range tests {
		for _, onPG := range []bool{false, true} {
			name := tt.failpoint
			if tt.blind {
				name = "blind/" + name
			}
			if onPG {
				name = "postgres/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var env []string
				if onPG {
					env = append(env, "WEIR_STORE="+pgtest.Schema(t))
				}
				crashAtBoundary(t, tt, env)
			})
		}
	}
}

// crashCase is a failpoint to kill the daemon at and what must follow.
type crashCase struct {
	failpoint  string
	wantOutput string // the result of the last node
	wantMails  int
	wantCode   string // node_failed code on the send node
	// blind runs crash_blind, whose send (testkit.once) has a probe that
	// cannot tell; wantMails then counts testkit.once's effects.
	blind bool
}

// crashAtBoundary is one case of TestCrashAtEveryDurableBoundary, with env
// added to the daemon's environment.
func crashAtBoundary(t *testing.T, tt crashCase, env []string) {
	d := newDaemon(t)
	d.start("", env...)
	d.register(crashFlow)
	d.stop()

	flow := "crash"
	if tt.blind {
		flow = "crash_blind"
	}
	d.start(tt.failpoint, env...)
	res, err := d.startRun(flow, `{"x": 42}`, "req-"+tt.failpoint)
	if tt.failpoint == "after-accept" {
		if err == nil {
			t.Fatalf("the start was answered although the daemon died first: %+v", res)
		}
	} else if err != nil {
		t.Fatalf("start: %v", err)
	}
	d.waitKilled()

	d.start("", env...)
	// The client retries with its business id: dedup answers with
	// the run accepted before the crash, and creates nothing new.
	again, err := d.startRun(flow, `{"x": 42}`, "req-"+tt.failpoint)
	if err != nil || !again.Existing {
		t.Fatalf("resubmit after restart: %+v %v, want the existing run", again, err)
	}
	if res.RunID != "" && again.RunID != res.RunID {
		t.Fatalf("dedup answered %s, the run was %s", again.RunID, res.RunID)
	}
	v := d.waitTerminal(again.RunID)
	if v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), tt.wantOutput) {
		t.Fatalf("run ended %s output %s error %+v, want output with %s\n%s", v.Phase, v.Output, v.Error, tt.wantOutput, d.log())
	}
	if v.Owner == "" || string(v.Input) != `{"x":42}` {
		t.Errorf("owner %q input %s changed", v.Owner, v.Input)
	}
	if v.Attempt < 2 && tt.failpoint != "after-accept" {
		t.Errorf("attempt %d: a resumed run must say so", v.Attempt)
	}
	got := d.outbox()
	if tt.blind {
		got = d.onceEffects()
	}
	if got != tt.wantMails {
		t.Errorf("the send ran %d times, want %d", got, tt.wantMails)
	}
	var code string
	for _, e := range d.events(v.ID) {
		if e.Type == "node_failed" && e.Node == "send" {
			code, _ = e.Detail["code"].(string)
		}
	}
	if code != tt.wantCode {
		t.Errorf("send node failed with %q, want %q", code, tt.wantCode)
	}
	runs, err := d.api.RunList(context.Background(), client.RunListParams{})
	if err != nil || len(runs) != 1 {
		t.Errorf("%d runs after the crash (%v), want exactly 1", len(runs), err)
	}
	d.stop()
}

const cohortCrashFlow = `
flow(name = "fan", nodes = [
    fanout("fan", items = lambda ctx: [10, 10, 10, 1500], tool = "testkit.sleep",
           args = lambda ctx, item: {"ms": item}, width = 4, depth = 1, max_items = 4,
           deadline = "700ms", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"fan": ctx.results["fan"]}),
])
`

// TestCrashDuringReduction kills the daemon at each step of a cohort's
// reduction (after the cutoff, after the canonical state, after the derived
// state): the restarted daemon finishes the reduction with the same cutoff
// instead of skipping it, closes once, writes the marker, and keeps the
// straggler that ends after the cutoff out of the batch.
func TestCrashDuringReduction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real daemons")
	}
	for _, fp := range []string{"cohort-cutoff", "reduce-canonical", "reduce-derived"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			d := newDaemon(t)
			d.start("")
			d.register(cohortCrashFlow)
			d.stop()
			d.start(fp)
			res, err := d.startRun("fan", `{}`, "")
			if err != nil {
				t.Fatal(err)
			}
			d.waitKilled()
			d.start("")
			v := d.waitTerminal(res.RunID)
			if v.Phase != apitypes.PhaseCompleted {
				t.Fatalf("%s %+v\n%s", v.Phase, v.Error, d.log())
			}
			var out struct {
				Fan struct {
					Results    []json.RawMessage `json:"results"`
					Sufficient bool              `json:"sufficient"`
					Cutoff     time.Time         `json:"cutoff"`
				}
			}
			if err := json.Unmarshal(v.Output, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Fan.Results) != 3 || out.Fan.Sufficient {
				t.Errorf("result %s: want the 3 quick results, insufficient (the fuse closed it)", v.Output)
			}
			closing, closed := 0, 0
			var cutoff string
			for _, e := range d.events(v.ID) {
				switch e.Type {
				case "cohort_closing":
					closing++
					cutoff, _ = e.Detail["cutoff"].(string)
				case "cohort_closed":
					closed++
				}
			}
			if closing != 1 || closed != 1 {
				t.Errorf("closing %d closed %d times, want once each: resume must finish the reduction, not redo the close", closing, closed)
			}
			if got := out.Fan.Cutoff.Format(time.RFC3339Nano); cutoff == "" || !sameInstant(cutoff, out.Fan.Cutoff) {
				t.Errorf("result cutoff %s, recorded at close %s: the cutoff must survive the crash", got, cutoff)
			}
			d.stop()
		})
	}
}

func sameInstant(s string, t time.Time) bool {
	p, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && p.Equal(t)
}
