package proclimit

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// DieWithParent makes the kernel kill the child if its parent dies (even
// by SIGKILL), so that no child outlives the process that owns its work.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// SetMemoryMax caps the data segment of process pid (RLIMIT_DATA): its
// heap cannot grow past n bytes.
func SetMemoryMax(pid int, n int64) error {
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &lim, nil)
}

// SetCPUMax caps the CPU seconds process pid may use in its lifetime
// (RLIMIT_CPU): at the limit the kernel sends SIGXCPU, which ends it.
func SetCPUMax(pid int, seconds int64) error {
	lim := unix.Rlimit{Cur: uint64(seconds), Max: uint64(seconds)}
	return unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil)
}

// LimitOwnCPU lowers this process's soft CPU limit to seconds (within its
// hard limit): a long-lived worker gives each request its own allowance
// by setting used + allowance before it.
func LimitOwnCPU(seconds int64) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CPU, &lim); err != nil {
		return err
	}
	lim.Cur = min(uint64(seconds), lim.Max)
	return unix.Setrlimit(unix.RLIMIT_CPU, &lim)
}

// Supported reports whether the limits are enforced on this system.
const Supported = true
