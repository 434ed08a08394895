package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

// limitedServer serves an echo of the request body on a Unix socket with
// l's timeouts and caps; adminUID is the uid exempt from the total cap.
func limitedServer(t *testing.T, l HTTPLimits, adminUID int) string {
	t.Helper()
	sock := filepath.Join(testutil.SocketDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	}), ConnContext, l)
	go func() { _ = srv.Serve(LimitListener(ln, l, adminUID, nil)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func dial(t *testing.T, sock string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one request on c and returns the status line and body.
func get(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// refused reads the answer a connection over a cap gets, unasked.
func refused(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer on a connection over the cap: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), CodeTooManyConnections) {
		t.Fatalf("over the cap: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

func TestPerPeerConnectionCap(t *testing.T) {
	t.Parallel()
	sock := limitedServer(t, HTTPLimits{MaxConnsPerPeer: 2}, os.Getuid())
	a, b := dial(t, sock), dial(t, sock)
	if code, body := get(t, a); code != http.StatusOK || body != "ok" {
		t.Fatalf("first connection: %d %s", code, body)
	}
	if code, _ := get(t, b); code != http.StatusOK {
		t.Fatalf("second connection: %d", code)
	}
	// The peer's third connection is refused, even for the daemon's own
	// user, and says why.
	if msg := refused(t, dial(t, sock)); !strings.Contains(msg, fmt.Sprintf("uid %d already has 2 connections open", os.Getuid())) {
		t.Fatalf("refusal: %s", msg)
	}
	a.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, body := get(t, dial(t, sock)); code != http.StatusOK {
			return fmt.Errorf("after one closed: %d %s", code, body)
		}
		return nil
	})
}

func TestTotalConnectionCapSparesTheAdmin(t *testing.T) {
	t.Parallel()
	// As a stranger (no uid is -1), the third connection is one too many.
	sock := limitedServer(t, HTTPLimits{MaxConns: 2}, -1)
	dial(t, sock)
	dial(t, sock)
	if msg := refused(t, dial(t, sock)); !strings.Contains(msg, "max_conns") {
		t.Fatalf("refusal: %s", msg)
	}
	// The daemon's own user is not counted against the total.
	sock = limitedServer(t, HTTPLimits{MaxConns: 2}, os.Getuid())
	for range 3 {
		dial(t, sock)
	}
	if code, body := get(t, dial(t, sock)); code != http.StatusOK {
		t.Fatalf("the admin over the total cap: %d %s", code, body)
	}
}

// Slow clients are cut off: one that never finishes its headers, one
// that never finishes its body, and one that keeps an idle connection.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	sock := limitedServer(t, HTTPLimits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: time.Second}, os.Getuid())
	closed := func(c net.Conn) error {
		// The server hangs up: an end of file, or a reset if what it did
		// not read was still coming. Only our own deadline means it kept
		// the connection.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		return nil
	}
	headers := dial(t, sock)
	if _, err := io.WriteString(headers, "POST / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	body := dial(t, sock)
	if _, err := io.WriteString(body, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nslow"); err != nil {
		t.Fatal(err)
	}
	idle := dial(t, sock)
	if code, _ := get(t, idle); code != http.StatusOK {
		t.Fatalf("idle connection's first request: %d", code)
	}
	for name, c := range map[string]net.Conn{"unfinished headers": headers, "unfinished body": body, "idle": idle} {
		if err := closed(c); err != nil {
			t.Errorf("%s: the server kept the connection: %v", name, err)
		}
	}
}

// A route meant to stay open outlives the write timeout with HoldOpen;
// any other route is cut by it.
func TestHoldOpenOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const writeTimeout = 500 * time.Millisecond
	sock := filepath.Join(testutil.SocketDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	answerLate := func(w http.ResponseWriter, r *http.Request) {
		<-time.After(3 * writeTimeout) // the answer is due after the write timeout
		_, _ = io.WriteString(w, "late")
	}
	mux.HandleFunc("/plain", answerLate)
	mux.HandleFunc("/held", func(w http.ResponseWriter, r *http.Request) {
		if err := HoldOpen(w, time.Minute); err != nil {
			t.Error(err)
		}
		answerLate(w, r)
	})
	srv := NewHTTPServer(mux, nil, HTTPLimits{WriteTimeout: writeTimeout})
	go func() { _ = srv.Serve(LimitListener(ln, HTTPLimits{}, -1, nil)) }()
	t.Cleanup(func() { _ = srv.Close() })
	fetch := func(path string) (string, error) {
		c := dial(t, sock)
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := fetch("/held"); err != nil || body != "late" {
		t.Fatalf("a held route: %q %v", body, err)
	}
	if body, err := fetch("/plain"); err == nil && body == "late" {
		t.Fatal("a route that did not hold itself open answered after the write timeout")
	}
}
