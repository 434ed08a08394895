package main

import (
	"runtime/debug"

	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/sandbox"
)

// newSandbox starts the pool of worker processes that evaluates flow
// scripts for serve, exec and flow check, with c's sandbox block (nil:
// the defaults). No worker starts before the first evaluation.
func newSandbox(c *config.Config) (*sandbox.Pool, error) {
	var sc sandbox.Config
	if c != nil {
		sc = sandbox.Config{Workers: c.Sandbox.Workers, Memory: c.Sandbox.Memory, Timeout: c.Sandbox.Timeout}
	}
	return sandbox.New(sc)
}

// applyMemoryLimit sets the daemon's soft memory limit from c's
// memory_limit; 0 leaves the Go runtime's own (GOMEMLIMIT, else none).
func applyMemoryLimit(c *config.Config) {
	if c.MemoryLimit > 0 {
		debug.SetMemoryLimit(c.MemoryLimit)
	}
}
