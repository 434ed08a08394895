package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// TestRunStream: a client follows a parked run over GET
// /v1/runs/{id}/stream, sees the open wait in a run message, decides it,
// and sees the run complete and the stream end with every event, in
// order; following again from the last seq sends no event twice. Another
// owner's run answers like a missing one before any stream starts.
func TestRunStream(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	_, ac := newClients(t, b)
	id := b.start(t, alice, "gate", `{}`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var seqs []uint64
	var decided bool
	var last *apitypes.Run
	var ended bool
	err := ac.RunStream(ctx, id, 0, func(m client.StreamMessage) error {
		switch m.Name {
		case apitypes.StreamEvent:
			if n := len(seqs); n > 0 && m.Event.Seq <= seqs[n-1] {
				t.Errorf("event %d after %d", m.Event.Seq, seqs[n-1])
			}
			seqs = append(seqs, m.Event.Seq)
		case apitypes.StreamRun:
			last = m.Run
			if !decided && len(m.Run.Waits) == 1 && m.Run.Waits[0].ID == "approve@1" {
				decided = true
				if _, err := ac.RunApprove(ctx, id, "approve@1", []byte(`"yes"`)); err != nil {
					return err
				}
			}
		case apitypes.StreamEnd:
			ended = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !decided || !ended || last == nil || last.Phase != apitypes.PhaseCompleted || string(last.Output) != `{"ok":"yes"}` {
		t.Fatalf("decided %v ended %v last run %+v", decided, ended, last)
	}
	all, err := client.Collect(ac.RunEventsAll(ctx, id, client.EventListParams{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(seqs) {
		t.Errorf("the stream sent %d events, the run has %d", len(seqs), len(all))
	}
	// From the last seq: the run and the end, no event again.
	again := 0
	if err := ac.RunStream(ctx, id, seqs[len(seqs)-1], func(m client.StreamMessage) error {
		if m.Name == apitypes.StreamEvent {
			again++
		}
		return nil
	}); err != nil || again != 0 {
		t.Errorf("following from the last seq: %d events again, err %v", again, err)
	}

	bc, err := client.New(b.tcpURL, client.WithToken(bobToken))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	errBob := bc.RunStream(ctx, id, 0, func(client.StreamMessage) error { return errors.New("bob saw a message") })
	errMissing := bc.RunStream(ctx, "run_missing", 0, func(client.StreamMessage) error { return nil })
	apiError(t, "bob follows alice's run", errBob, engine.CodeNotFound, http.StatusNotFound)
	apiError(t, "bob follows a missing run", errMissing, engine.CodeNotFound, http.StatusNotFound)
	if strings.ReplaceAll(errBob.Error(), id, "X") != strings.ReplaceAll(errMissing.Error(), "run_missing", "X") {
		t.Errorf("another owner's run answers %q, a missing one %q", errBob, errMissing)
	}
}

// TestRunsStream: the run list's stream sends the caller's page, and
// sends it again when a run of the page changes phase; bad parameters are
// refused before the stream starts.
func TestRunsStream(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "gate", `{}`, "")
	b.start(t, bob, "echo", `{}`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.tcpURL+"/v1/runs/stream?phase=waiting", nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := b.tcp.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("answer %d %q", resp.StatusCode, ct)
	}
	buf := make([]byte, 1<<16)
	var got strings.Builder
	readUntil := func(want string) {
		t.Helper()
		for !strings.Contains(got.String(), want) {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				t.Fatalf("stream ended before %q: %v\n%s", want, err, got.String())
			}
		}
	}
	readUntil(`"phase":"waiting"`)
	if !strings.Contains(got.String(), "event: runs\ndata: [{\"id\":\""+id) || strings.Contains(got.String(), `"owner":"bob"`) {
		t.Fatalf("first page:\n%s", got.String())
	}
	got.Reset()
	if a := b.send(t, alice, "POST", "/v1/runs/"+id+"/waits/approve/approve", `{}`); a.status != 200 {
		t.Fatalf("approve: %d %s", a.status, a.body)
	}
	readUntil("event: runs\ndata: []\n\n") // the run left the waiting phase

	if a := b.send(t, alice, "GET", "/v1/runs/stream?phase=sleepy", nil); a.status != 400 || a.errorBody(t).Code != engine.CodeBadRequest {
		t.Errorf("a bad phase: %d %s", a.status, a.body)
	}
}

// TestFlowSource: GET /v1/flows/{name} answers the latest version with
// its source files, to every user; an unknown flow is E_UNKNOWN_FLOW.
func TestFlowSource(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	_, ac := newClients(t, b)
	fs, err := ac.FlowSource(context.Background(), "gate")
	if err != nil {
		t.Fatal(err)
	}
	if fs.Name != "gate" || fs.Hash == "" || fs.Version != 1 || fs.Nodes != 2 || fs.RegisteredAt.IsZero() ||
		len(fs.Files) != 1 || fs.Files[0].Path != "test.star" || fs.Files[0].Src != testFlows {
		t.Errorf("flow source %+v", fs)
	}
	_, err = ac.FlowSource(context.Background(), "nope")
	apiError(t, "an unknown flow", err, engine.CodeUnknownFlow, http.StatusNotFound)
	if a := b.send(t, bob, "GET", "/v1/flows/gate/graph?format=svg", nil); a.status != 200 || a.header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(a.body), `data-node="approve"`) {
		t.Errorf("svg graph: %d %q %s", a.status, a.header.Get("Content-Type"), a.body)
	}
}

// TestShutdownEndsStreams: a server made with EndStreamsOnShutdown shuts
// down at once with a run's stream open (the stream ends) and a held wait
// (answered unmet, the run as it is), instead of holding the stop for
// their bounds.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "gate", `{}`, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var active atomic.Int32
	hs := &http.Server{Handler: b.srv, ConnContext: ConnContext, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateActive {
			active.Add(1)
		}
	}}
	EndStreamsOnShutdown(hs)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		return http.DefaultTransport.RoundTrip(req)
	}
	type answer struct {
		body []byte
		err  error
	}
	streamed, waited := make(chan answer, 1), make(chan answer, 1)
	for path, out := range map[string]chan answer{"/v1/runs/" + id + "/stream": streamed, "/v1/runs/" + id + "/wait?until=terminal&timeout=30s": waited} {
		go func() {
			resp, err := get(path)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			out <- answer{body, err}
		}()
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := active.Load(); n < 2 {
			return fmt.Errorf("%d requests at the server", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a stream and a wait open: %v", err)
	}
	<-served
	if s := <-streamed; s.err != nil || !strings.Contains(string(s.body), "event: run\n") {
		t.Errorf("the stream: %v %s", s.err, s.body)
	}
	w := <-waited
	var res apitypes.RunWaitResult
	if w.err != nil || json.Unmarshal(w.body, &res) != nil || res.Met || res.Run == nil || res.Run.Phase.Terminal() {
		t.Errorf("the held wait answered %v %s", w.err, w.body)
	}
}
