package main

import (
	"runtime/debug"
	"testing"

	"github.com/weirhq/weir/runtime/config"
	rtdaemon "github.com/weirhq/weir/runtime/daemon"
)

// memory_limit becomes the Go runtime's soft memory limit (GOMEMLIMIT);
// without it the runtime's own stays.
func TestMemoryLimitIsTheRuntimes(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	rtdaemon.ApplyMemoryLimit(&config.Config{})
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("no memory_limit changed the limit to %d", got)
	}
	rtdaemon.ApplyMemoryLimit(&config.Config{MemoryLimit: 3 << 30})
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Fatalf("limit %d, want 3 GiB", got)
	}
}
