//go:build unix

package proclimit

import (
	"errors"
	"os/exec"
	"syscall"
)

// OwnGroup starts the child as the leader of a process group of its own,
// so that KillGroup reaches whatever it starts in turn: a plugin that is a
// shell script, or forks a helper, leaves no descendant behind holding
// the pipes its parent reads (the parent would wait on them until that
// descendant exits).
func OwnGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// KillGroup sends SIGKILL to the process group led by pid (started with
// OwnGroup). A group already gone is not an error.
func KillGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
