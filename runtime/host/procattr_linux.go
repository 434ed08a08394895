package host

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// dieWithHost makes the kernel kill the plugin if weir dies (even by
// SIGKILL), so that no plugin outlives the host that owns its calls.
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// setMemoryMax caps the data segment of process pid (RLIMIT_DATA): its
// heap cannot grow past n bytes. RLIMIT_AS would count the Go runtime's
// address-space reservations and kill a Go plugin at start.
func setMemoryMax(pid int, n int64) error {
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &lim, nil)
}
