//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// setProcAttr ties a stdio server's life to the plugin's: if weir kills
// the plugin, the kernel kills the server.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
