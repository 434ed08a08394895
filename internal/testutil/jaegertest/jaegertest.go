// Package jaegertest runs a real Jaeger v2 for tests: the jaeger binary
// built from the tools/jaeger module (`make test-jaeger` builds it), with
// in-memory storage, an OTLP/HTTP receiver and the query service on free
// loopback ports, and reads traces back through Jaeger's HTTP query API
// (/api/traces/ID), as a person looking at the trace would get them.
package jaegertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Env names the variable that gives the jaeger binary's path. Without it
// Binary skips the test, saying how to run it; Required makes that a
// failure (CI).
const (
	Env      = "WEIR_JAEGER"
	Required = "WEIR_TEST_JAEGER"
)

// Binary returns the jaeger binary's path from WEIR_JAEGER, or skips the
// test with the reason (fails it if WEIR_TEST_JAEGER=required).
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		if os.Getenv(Required) == "required" {
			t.Fatalf("%s is not set and %s=required: run make test-jaeger", Env, Required)
		}
		t.Skipf("needs a Jaeger v2 binary in %s (make test-jaeger builds tools/jaeger's and runs this)", Env)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v", Env, bin, err)
	}
	return bin
}

// Jaeger is a running Jaeger v2.
type Jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver (a telemetry
	// block's otlp_endpoint); Query the base URL of its query service.
	OTLP, Query string
	cmd         *exec.Cmd
	out         *lockedBuffer
	exited      chan struct{}
}

// config is an all-in-one configuration with only what a test needs:
// traces in memory, OTLP/HTTP in, the query API out, no metrics port.
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Start runs the jaeger binary bin until the test ends, and waits until
// both its receiver and its query API answer. Free ports are picked by
// listening on port 0; another process may take one before Jaeger does,
// so a start that fails is tried again on other ports.
func Start(t testing.TB, bin string) *Jaeger {
	t.Helper()
	var last string
	for try := 0; try < 3; try++ {
		j, err := start(t, bin)
		if err == nil {
			return j
		}
		last = err.Error()
	}
	t.Fatalf("jaeger did not start: %s", last)
	return nil
}

func start(t testing.TB, bin string) (*Jaeger, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, ports[0], ports[1], ports[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	j := &Jaeger{OTLP: "http://127.0.0.1:" + strconv.Itoa(ports[2]), Query: "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		out: &lockedBuffer{}, exited: make(chan struct{})}
	j.cmd = exec.Command(bin, "--config", "file:"+cfg)
	j.cmd.Stdout, j.cmd.Stderr = j.out, j.out
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = j.cmd.Wait()
		close(j.exited)
	}()
	stop := func() {
		_ = j.cmd.Process.Kill()
		<-j.exited
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-j.exited:
			return nil, fmt.Errorf("it exited: %s", j.out.tail())
		default:
		}
		if j.ready() {
			t.Cleanup(stop)
			return j, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("not ready in a minute: %s", j.out.tail())
		}
		time.Sleep(50 * time.Millisecond) // polling readiness, not a stand-in for it
	}
}

// ready says both the query API and the OTLP receiver answer.
func (j *Jaeger) ready() bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(j.Query + "/api/services")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	// An empty export request: 200 once the receiver is up.
	resp, err = c.Post(j.OTLP+"/v1/traces", "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Log is what Jaeger wrote so far (its tail), for a failure's message.
func (j *Jaeger) Log() string { return j.out.tail() }

// Span is a span as Jaeger's query API returns it.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	} `json:"tags"`
	Logs []struct {
		Fields []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
}

// Parent is the span's CHILD_OF reference's span id, "" for none.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of the span's tag k (nil if it has none): a string,
// a bool or a float64 (Jaeger's JSON numbers).
func (s Span) Tag(k string) any {
	for _, tg := range s.Tags {
		if tg.Key == k {
			return tg.Value
		}
	}
	return nil
}

// Trace returns the spans Jaeger holds of the trace id (hex), or an
// error saying why there are none yet.
func (j *Jaeger) Trace(ctx context.Context, id string) ([]Span, error) {
	return j.get(ctx, "/api/traces/"+id)
}

// Find returns the spans of the traces of service that have a span with
// the tag key = value, as a person searching Jaeger gets them.
func (j *Jaeger) Find(ctx context.Context, service, key, value string) ([]Span, error) {
	tags, err := json.Marshal(map[string]string{key: value})
	if err != nil {
		return nil, err
	}
	q := url.Values{"service": {service}, "tags": {string(tags)}, "lookback": {"1h"}, "limit": {"20"}}
	return j.get(ctx, "/api/traces?"+q.Encode())
}

func (j *Jaeger) get(ctx context.Context, path string) ([]Span, error) {
	id := path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s %.200s", id, resp.Status, body)
	}
	var out struct {
		Data []struct {
			Spans []Span `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("GET %s: %v", id, err)
	}
	var spans []Span
	for _, d := range out.Data {
		spans = append(spans, d.Spans...)
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("GET %s: no spans yet", id)
	}
	return spans, nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lockedBuffer keeps the last of a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 1<<20 {
		l.b = l.b[len(l.b)-(1<<19):]
	}
	return len(p), nil
}

func (l *lockedBuffer) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) > 4000 {
		return string(l.b[len(l.b)-4000:])
	}
	return string(l.b)
}
