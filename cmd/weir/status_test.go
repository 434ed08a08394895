package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// TestPrintServersDown: status names each server a plugin cannot reach,
// since when and why.
func TestPrintServersDown(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	printServersDown(&b, []apitypes.ServerDown{{Plugin: "mcp", Name: "files", Since: since, Error: "connection refused"}}, since.Add(90*time.Second))
	if want := "server down:     mcp server files down since 2026-01-02T03:04:05Z (1m30s): connection refused\n"; b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
}

// TestStatusNamesADownMCPServer: with a real daemon bridging a
// streamable HTTP MCP server, `weir status` names the server once a run's
// call could not reach it, says since when, and stops naming it once the
// server answers again.
func TestStatusNamesADownMCPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon and MCP server")
	}
	t.Parallel()
	srv := testutil.StartListener(t, testutil.Program(t, "demo-mcp"), "-journal", filepath.Join(t.TempDir(), "journal"))
	d := mcpDaemonWith(t, fmt.Sprintf(`servers = { demo = { url = "http://%s/mcp" } }
  trust_annotations = ["demo"]`, srv.Addr))
	d.start("")
	d.register(`flow(name = "ping", nodes = [task("e", tool = "mcp.demo-echo", args = lambda ctx: {"text": "x"})])`)
	srv.Kill()
	if _, err := d.startRun("ping", `{}`, "req-ping"); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		_, out, _, _ := run(t, nil, "--data", d.data, "--plugins", d.plugins, "--socket", d.socket, "status")
		return out
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if out := status(); !strings.Contains(out, "server down:     mcp server demo down since ") {
			return fmt.Errorf("status does not name the down server:\n%s", out)
		}
		return nil
	})
	_, out, _, _ := run(t, nil, "--data", d.data, "--plugins", d.plugins, "--socket", d.socket, "status", "--json")
	var st struct {
		Admission   string `json:"admission"`
		ServersDown []struct {
			Plugin, Name string
			Since        time.Time
		} `json:"servers_down"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Admission != "open" || len(st.ServersDown) != 1 ||
		st.ServersDown[0].Plugin != "mcp" || st.ServersDown[0].Name != "demo" || st.ServersDown[0].Since.IsZero() {
		t.Fatalf("status --json: %s (%v)", out, err)
	}
	srv.Restart()
	testutil.Eventually(t, time.Minute, func() error {
		if out := status(); strings.Contains(out, "server down:") {
			return fmt.Errorf("status still names the server once it is back:\n%s", out)
		}
		return nil
	})
}
