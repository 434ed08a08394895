//go:build !linux

package host

import (
	"errors"
	"os/exec"
)

// dieWithHost has no portable equivalent outside Linux: there, a plugin
// notices its host is gone when its connection closes.
func dieWithHost(cmd *exec.Cmd) {}

// setMemoryMax is Linux-only (prlimit on a started process).
func setMemoryMax(pid int, n int64) error {
	return errors.New("memory_max is supported on Linux only")
}
