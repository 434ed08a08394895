package host

import (
	"os/exec"
	"syscall"
)

// dieWithHost makes the kernel kill the plugin if weir dies (even by
// SIGKILL), so that no plugin outlives the host that owns its calls.
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
