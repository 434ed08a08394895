// Command hugeline is not a weir plugin: in place of go-plugin's handshake
// it starts a child that prints a 300 KB line on the shared stdout and
// then sleeps, as a shell script's command would. Both record their pids
// in $TMPDIR/hugeline.pids first, so a test can check that the host ended
// them.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	record()
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Stdout.WriteString(strings.Repeat("x", 300<<10) + "\n")
		time.Sleep(10 * time.Minute)
		return
	}
	child := exec.Command(os.Args[0], "child")
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	time.Sleep(10 * time.Minute)
}

// record appends this process's pid to $TMPDIR/hugeline.pids.
func record() {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "hugeline.pids"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
}
