package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// eventFlows: a run that waits for a push to its repository, and a
// trigger that starts a run for every push.
const eventFlows = `
flow(name = "await_push", nodes = [
    wait("pushed", event = "github.push", match = lambda ctx: ctx.input["repo"], timeout = "1h", next = "done"),
    task("done", tool = "testkit.echo", args = lambda ctx: {"ref": ctx.results["pushed"]["ref"]}),
])
flow(name = "on_push", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"repo": ctx.input["repo"]})])
on_event("github.push", flow = "on_push", input = lambda ev: {"repo": ev["key"]})
`

const hookSecret = "It's a Secret to Everybody"

// hookDaemon is a daemon serving a GitHub hook whose events are its own
// OS user's, the owner its socket gives the test.
func hookDaemon(t *testing.T) *daemon {
	t.Helper()
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	secret := filepath.Join(t.TempDir(), "github.secret")
	if err := os.WriteFile(secret, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.config = fmt.Sprintf(`hook "gh" {
  secret_file  = %q
  signature    = "github"
  event        = "github"
  event_header = "X-GitHub-Event"
  id_header    = "X-GitHub-Delivery"
  key          = "/repository/full_name"
}
`, secret)
	return d
}

// deliver posts a GitHub push delivery to the hook on d's socket, signed
// with secret, and answers its status and body.
func (d *daemon) deliver(delivery, repo, secret string) (int, string) {
	d.t.Helper()
	body := fmt.Sprintf(`{"ref": "refs/heads/main", "repository": {"full_name": %q}}`, repo)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req, err := http.NewRequest(http.MethodPost, "http://weir/v1/hooks/gh", strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
	}}}
	resp, err := hc.Do(req)
	if err != nil {
		d.t.Fatalf("delivering %s: %v", delivery, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// runsOf lists the runs of flow.
func (d *daemon) runsOf(flow string) []apitypes.Run {
	d.t.Helper()
	runs, err := client.Collect(d.api.RunListAll(context.Background(), client.RunListParams{Flow: flow}))
	if err != nil {
		d.t.Fatal(err)
	}
	return runs
}

// TestEventsThroughHooksAndTheCLI drives events against a real daemon: a
// GitHub delivery signed with the hook's secret wakes the run waiting for
// a push to its repository and starts the trigger's run; the provider's
// redelivery starts nothing more; a bad signature is 401 and stores
// nothing; weir event send keeps an event no wait received, weir event
// ls --undelivered lists it, and the run that waits for it later takes it.
func TestEventsThroughHooksAndTheCLI(t *testing.T) {
	d := hookDaemon(t)
	d.start("")
	ctx := context.Background()
	code, out, errb := d.cli("flow", "register", writeFlowFile(t, "events.star", eventFlows))
	if code != 0 || !strings.Contains(out, "trigger on_push_on_github_push: each github.push event starts on_push\n") {
		t.Fatalf("register: %d\n%s%s", code, out, errb)
	}
	waiting, err := d.startRun("await_push", `{"repo": "acme/widgets"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	d.runIs(waiting.RunID, "waiting for its push", func(v *apitypes.Run) bool {
		return len(v.Waits) == 1 && v.Waits[0].Kind == engine.WaitEvent
	})

	if status, body := d.deliver("d-bad", "acme/widgets", "not the secret"); status != http.StatusUnauthorized || !strings.Contains(body, "E_IDENTITY") {
		t.Fatalf("a bad signature: %d %s", status, body)
	}
	status, body := d.deliver("d-1", "acme/widgets", hookSecret)
	if status != http.StatusAccepted || !strings.Contains(body, `"duplicate":false`) {
		t.Fatalf("delivery: %d %s\n%s", status, body, d.log())
	}
	if v := d.waitTerminal(waiting.RunID); v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"ref":"refs/heads/main"`) {
		t.Fatalf("the waiting run: %s %s %+v", v.Phase, v.Output, v.Error)
	}
	if status, body := d.deliver("d-1", "acme/widgets", hookSecret); status != http.StatusAccepted || !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("redelivery: %d %s", status, body)
	}
	started := d.runsOf("on_push")
	if len(started) != 1 || started[0].StartedBy != "trigger:on_push_on_github_push" ||
		started[0].RequestID != engine.TriggerRequestID("d-1", "on_push_on_github_push") {
		t.Fatalf("the trigger's runs %+v, want one", started)
	}
	evs, err := d.api.Events(ctx, client.EventListOptions{})
	if err != nil || len(evs) != 1 || evs[0].ID != "d-1" || len(evs[0].Delivered) != 1 || len(evs[0].Started) != 1 {
		t.Fatalf("events %+v %v: the bad delivery stored nothing, the good one once", evs, err)
	}

	code, out, errb = d.cli("event", "send", "github.push", "--id", "later-1", "--key", "acme/gadgets", "--payload", `{"ref": "v2"}`)
	if code != 0 || !strings.Contains(out, "event later-1 accepted\nno wait received it: kept") || !strings.Contains(out, "trigger on_push_on_github_push started run_") {
		t.Fatalf("event send: %d\n%s%s", code, out, errb)
	}
	code, out, _ = d.cli("event", "ls", "--undelivered")
	if code != 0 || !strings.Contains(out, "later-1") || strings.Contains(out, "d-1") {
		t.Errorf("event ls --undelivered:\n%s", out)
	}
	later, err := d.startRun("await_push", `{"repo": "acme/gadgets"}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := d.waitTerminal(later.RunID); v.Phase != apitypes.PhaseCompleted || !strings.Contains(string(v.Output), `"ref":"v2"`) {
		t.Fatalf("the later run: %s %s %+v", v.Phase, v.Output, v.Error)
	}
	code, out, _ = d.cli("trigger", "ls")
	if code != 0 || !strings.Contains(out, "on_push_on_github_push  github.push  on_push") {
		t.Errorf("trigger ls:\n%s", out)
	}
	// trigger rm removes it by name, as schedule rm removes a schedule.
	if code, out, errb := d.cli("trigger", "rm", "on_push_on_github_push"); code != 0 || out != "trigger on_push_on_github_push removed\n" {
		t.Errorf("trigger rm: %d %q %s", code, out, errb)
	}
	if code, out, _ := d.cli("trigger", "ls"); code != 0 || strings.Contains(out, "on_push_on_github_push") {
		t.Errorf("trigger ls after rm:\n%s", out)
	}
	code, _, errb = d.cli("event", "send", "Not An Event", "--id", "x")
	if code == 0 || !strings.Contains(errb, "E_BAD_REQUEST") {
		t.Errorf("a bad event name: %d %s", code, errb)
	}
	d.stop()
}

// TestCrashEventStartsEachTriggerOnce kills the daemon between an event's
// acceptance and its trigger's start (event-accepted), and between the
// start and the event's record of it (event-triggered): after the
// restart the events service starts what is left, and the trigger has
// started exactly one run for the event, however often it is sent again.
func TestCrashEventStartsEachTriggerOnce(t *testing.T) {
	for _, fp := range []string{"event-accepted", "event-triggered"} {
		t.Run(fp, func(t *testing.T) {
			e2e(t, "starts and kills real daemons")
			ctx := context.Background()
			d := newDaemon(t)
			d.start("")
			d.register(eventFlows)
			d.stop()
			d.start(fp)
			send := apitypes.EventSendRequest{ID: "crash-1", Name: "github.push", Key: "acme/crash", Payload: json.RawMessage(`{"ref": "x"}`)}
			if _, err := d.api.SendEvent(ctx, send); err == nil {
				t.Fatal("the event was answered although the daemon died first")
			}
			d.waitKilled()
			d.start("")
			testutil.Eventually(t, 60*time.Second, func() error {
				evs, err := d.api.Events(ctx, client.EventListOptions{})
				if err != nil {
					return err
				}
				if len(evs) != 1 || evs[0].TriggersPending || len(evs[0].Started) != 1 {
					return fmt.Errorf("events %+v: want crash-1 with its trigger's run started\n%s", evs, d.log())
				}
				return nil
			})
			again, err := d.api.SendEvent(ctx, send)
			if err != nil || !again.Duplicate {
				t.Fatalf("sent again: %+v %v", again, err)
			}
			runs := d.runsOf("on_push")
			if len(runs) != 1 || runs[0].RequestID != engine.TriggerRequestID("crash-1", "on_push_on_github_push") {
				t.Fatalf("the trigger's runs %+v, want one", runs)
			}
			if v := d.waitTerminal(runs[0].ID); v.Phase != apitypes.PhaseCompleted {
				t.Errorf("its run %s %+v", v.Phase, v.Error)
			}
			d.stop()
		})
	}
}
