// Command weir is the one binary of weir: the daemon (`weir serve`) and every
// client command. main stays thin so that tests can drive Main in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/weirhq/weir/runtime/sandbox"
)

func main() {
	// A sandbox worker serves scripts and exits here, before anything of
	// the command runs (runtime/sandbox).
	sandbox.ServeIfWorker()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := NewMain().Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
