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

// ownGroup starts the plugin as the leader of its own process group, so
// that killing it ends what it started too (see killGroup).
func ownGroup(cmd *exec.Cmd) { proclimit.OwnGroup(cmd) }

// killGroup ends plugin process pid and every descendant left in its
// group.
func killGroup(pid int) error { return proclimit.KillGroup(pid) }
