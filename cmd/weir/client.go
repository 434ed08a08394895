package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
)

// apiError is an error answer of the daemon's API.
type apiError struct {
	Status int
	// Body is the answer as sent, for answers that carry more than an
	// error (a 422 of registration carries the diagnostics).
	Body    []byte `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Class   string `json:"class"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// codeHTTP is the code of an error answer that carries none of its own (a
// proxy's page, a daemon dying mid-answer): the HTTP status stands in.
const codeHTTP = "E_HTTP"

// client talks to the daemon's API on its Unix socket.
type client struct {
	socket string
	http   *http.Client
}

func (m *Main) client() *client {
	sock := m.SocketPath
	return &client{socket: sock, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

// do sends a request to /v1/path with body (nil: none) and decodes the
// answer into out. A daemon that is not running is said plainly.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://weir/v1"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no weir daemon answers on %s: start one with 'weir serve' (or pass --socket)", c.socket)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Status: resp.StatusCode, Body: data}
		if json.Unmarshal(data, ae) != nil || ae.Code == "" {
			ae.Code, ae.Message = codeHTTP, fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(data))
		}
		return ae
	}
	if text, ok := out.(*string); ok {
		*text = string(data)
		return nil
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readInput reads --input: inline JSON, or @file.
func readInput(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] == '@' {
		b, err := os.ReadFile(s[1:])
		if err != nil {
			return nil, usageErrorf("--input: %v", err)
		}
		s = string(b)
	}
	if !json.Valid([]byte(s)) {
		return nil, usageErrorf("--input is not valid JSON: %s", s)
	}
	return json.RawMessage(s), nil
}
