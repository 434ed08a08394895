package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSlowClientsCannotExhaustTheDaemon: a peer that opens connections
// and sends bodies it never finishes gets as many as max_conns_per_peer,
// the next is refused at once (503 E_TOO_MANY_CONNECTIONS), the daemon
// cuts the slow ones at read_timeout, and then answers as before.
func TestSlowClientsCannotExhaustTheDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon")
	}
	t.Parallel()
	d := newDaemon(t)
	d.config = "http {\n  read_header_timeout = \"1s\"\n  read_timeout = \"2s\"\n  max_conns_per_peer = 8\n}\n"
	d.start("")
	d.api.Close() // its idle connection would count against the cap
	var slow []net.Conn
	for range 8 {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: weir\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"flow\":"); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	extra, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "E_TOO_MANY_CONNECTIONS") {
		t.Fatalf("over the cap: %d %s", resp.StatusCode, b)
	}
	for i, c := range slow {
		// The daemon hangs up: an end of file, or a reset since the body
		// it did not read was still coming. Only our own deadline means
		// it kept the connection.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("slow connection %d still open: %v", i, err)
		}
	}
	// The daemon answers again.
	env := map[string]string{"WEIR_SOCKET": d.socket, "WEIR_DATA": d.data}
	if code, out, errb, _ := run(t, env, "status"); code != 0 || !strings.Contains(out, "admission:       open") {
		t.Fatalf("status after the slow clients: %d %s %s", code, out, errb)
	}
	if _, err := d.api.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.stop()
}
