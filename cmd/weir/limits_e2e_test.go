package main

import (
	"context"
	"errors"
	"io"
	"net"
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
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	d.config = "http {\n  read_header_timeout = \"1s\"\n  read_timeout = \"2s\"\n  max_conns_per_peer = 8\n}\n"
	d.start("")
	d.api.Close() // its idle connection would count against the cap
	// Nine connections that each send a request whose body never comes:
	// at most eight are taken, the others are refused at once (more than
	// one if the client's closed idle connections, two at most, were not
	// released yet).
	var conns []net.Conn
	for range 9 {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "POST /v1/runs HTTP/1.1\r\nHost: weir\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"flow\":")
		conns = append(conns, c)
	}
	refused := 0
	for i, c := range conns {
		// The daemon hangs up on each: a refusal at once, or a cut at
		// read_timeout (an end of file, or a reset since the body it did
		// not read was still coming). Only our own deadline means it
		// kept the connection.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		got, err := io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection %d still open: %v", i, err)
		}
		if strings.HasPrefix(string(got), "HTTP/1.1 503") && strings.Contains(string(got), "E_TOO_MANY_CONNECTIONS") {
			refused++
		}
	}
	if refused == 0 || refused > 3 {
		t.Fatalf("%d of 9 connections refused, want the one over max_conns_per_peer = 8 (up to three)", refused)
	}
	// The daemon answers again.
	if code, out, errb := d.cli("status"); code != 0 || !strings.Contains(out, "admission:       open") {
		t.Fatalf("status after the slow clients: %d %s %s", code, out, errb)
	}
	if _, err := d.api.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.stop()
}
