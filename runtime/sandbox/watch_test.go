package sandbox

import (
	"context"
	"os"
	"testing"

	"github.com/weirhq/weir/flows"
)

// RLIMIT_DATA does not bound everything a process can map (the kernel
// lets a mapping replace reserved address space uncounted), so the pool
// also watches a busy worker's resident memory. A worker stands in here
// that fills 256 MiB with the data cap off (dd, keeping the pipe open on
// fd 3 since it reopens stdout); the watch kills it.
func TestResidentMemoryOverTheCapKillsTheWorker(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skipf("the watch reads /proc: %v", err)
	}
	p, err := New(Config{Workers: 1, Memory: 64 << 20,
		Command: []string{"/bin/sh", "-c", "head -c 4 >/dev/null; exec 3>&1 dd if=/dev/zero of=/dev/null bs=256M count=100000"}})
	if err != nil {
		t.Fatal(err)
	}
	p.cfg.noMemoryCap = true
	defer p.Close()
	_, err = p.Call(context.Background(), flows.Sources{Hash: "h"}, flows.Context{}, []flows.Call{{Ref: flows.CallableRef{Flow: "f", Node: "n", Param: "args"}}})
	if flows.LimitOf(err) != flows.LimitMemory {
		t.Fatalf("got %v, want the memory limit", err)
	}
}
