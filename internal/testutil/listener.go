package testutil

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
)

// Listener is a server program of the test that takes -listen ADDR and
// prints "listening on ADDR" as its first line on stdout, as
// examples/cmd/demo-mcp does: a test kills it and starts it again on the
// same address, a server restart as its clients see one. It is killed
// when the test ends.
type Listener struct {
	t    testing.TB
	argv []string
	// Addr is the address it listens on, HOST:PORT.
	Addr string
	cmd  *exec.Cmd
}

// StartListener starts argv with -listen 127.0.0.1:0 and waits until it
// listens.
func StartListener(t testing.TB, argv ...string) *Listener {
	t.Helper()
	l := &Listener{t: t, argv: argv}
	l.start("127.0.0.1:0")
	return l
}

func (l *Listener) start(addr string) {
	l.t.Helper()
	cmd := exec.Command(l.argv[0], append(l.argv[1:], "-listen", addr)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		l.t.Fatalf("%s: %v", l.argv[0], err)
	}
	l.Addr, l.cmd = strings.TrimSpace(strings.TrimPrefix(line, "listening on ")), cmd
}

// Kill kills the program with SIGKILL and waits until it is gone.
func (l *Listener) Kill() {
	l.t.Helper()
	_ = l.cmd.Process.Kill()
	_ = l.cmd.Wait()
}

// Restart starts the program again on its address: a new process, which
// remembers nothing of the last one.
func (l *Listener) Restart() { l.start(l.Addr) }
