package main

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/sdk/wire"
)

// TestPrintServersDown: status names each server a plugin cannot reach,
// since when and why.
func TestPrintServersDown(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	printServersDown(&b, []serverDown{{Plugin: "mcp", DownServer: wire.DownServer{Name: "files", Since: since, Error: "connection refused"}}}, since.Add(90*time.Second))
	if want := "server down:     mcp server files down since 2026-01-02T03:04:05Z (1m30s): connection refused\n"; b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
}
