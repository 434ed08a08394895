package host

import (
	"os/exec"

	"github.com/weirhq/weir/runtime/internal/proclimit"
)

// dieWithHost makes the kernel kill the plugin if weir dies (even by
// SIGKILL), so that no plugin outlives the host that owns its calls.
func dieWithHost(cmd *exec.Cmd) { proclimit.DieWithParent(cmd) }

// setMemoryMax caps the data segment of process pid (RLIMIT_DATA).
func setMemoryMax(pid int, n int64) error { return proclimit.SetMemoryMax(pid, n) }
