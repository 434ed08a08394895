//go:build !linux

package proclimit

import (
	"errors"
	"os/exec"
)

var errUnsupported = errors.New("process limits are supported on Linux only")

// DieWithParent has no portable equivalent outside Linux: there, a child
// notices its parent is gone when its pipe or connection closes.
func DieWithParent(cmd *exec.Cmd) {}

// SetMemoryMax is Linux-only (prlimit on a started process).
func SetMemoryMax(pid int, n int64) error { return errUnsupported }

// SetCPUMax is Linux-only (prlimit on a started process).
func SetCPUMax(pid int, seconds int64) error { return errUnsupported }

// LimitOwnCPU is Linux-only.
func LimitOwnCPU(seconds int64) error { return errUnsupported }

// Supported reports whether the limits are enforced on this system.
const Supported = false
