package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServesAScriptUntilStopped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`{"steps":[{"text":"hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	stop := make(chan struct{})
	close(stop)
	if code := run([]string{"-addr", "127.0.0.1:0", "-script", path}, &out, &errOut, stop); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "serving 1 steps") || !strings.Contains(out.String(), "0 requests") {
		t.Fatalf("output %q", out.String())
	}
	// The example script shipped beside the command loads.
	if code := run([]string{"-addr", "127.0.0.1:0", "-script", "example.json"}, &out, &errOut, stop); code != 0 {
		t.Fatalf("example.json: exit %d: %s", code, errOut.String())
	}
	if code := run([]string{"-script", filepath.Join(t.TempDir(), "missing.json")}, &out, &errOut, stop); code != 1 {
		t.Fatalf("a missing script exited %d", code)
	}
	if code := run(nil, &out, &errOut, stop); code != 2 || !strings.Contains(errOut.String(), "-script is required") {
		t.Fatalf("no script exited %d: %s", code, errOut.String())
	}
}

// -h prints the flags and the script format, every match key with it, to
// stdout; a flag that does not exist gets the same on stderr, after the
// mistake.
func TestHelpPrintsTheScriptFormat(t *testing.T) {
	var out, errOut syncBuffer
	if code := run([]string{"-h"}, &out, &errOut, nil); code != 0 || errOut.String() != "" {
		t.Fatalf("-h exited %d: %s", code, errOut.String())
	}
	help := out.String()
	for _, want := range []string{"-script", "-addr", `"steps"`, `"match"`, `"match_last_user"`, `"match_system"`, `"node"`, "X-Weir-Node", "first step"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not say %s:\n%s", want, help)
		}
	}
	var out2, errOut2 syncBuffer
	if code := run([]string{"-scirpt", "s.json"}, &out2, &errOut2, nil); code != 2 || out2.String() != "" ||
		!strings.Contains(errOut2.String(), "flag provided but not defined: -scirpt") || !strings.Contains(errOut2.String(), `"match_last_user"`) {
		t.Fatalf("a wrong flag exited %d: stdout %q, stderr %q", code, out2.String(), errOut2.String())
	}
}
