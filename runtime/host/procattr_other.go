//go:build !linux

package host

import "os/exec"

// dieWithHost has no portable equivalent outside Linux: there, a plugin
// notices its host is gone when its connection closes.
func dieWithHost(cmd *exec.Cmd) {}
