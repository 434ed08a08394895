//go:build !unix

package proclimit

import "os/exec"

// OwnGroup has no equivalent outside Unix: the child stays in its
// parent's group.
func OwnGroup(cmd *exec.Cmd) {}

// KillGroup is Unix-only; elsewhere the caller's kill of the child alone
// stands.
func KillGroup(pid int) error { return nil }
