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

// A worker whose Go runtime dies of a signal it could not turn into a
// panic — what the runtime does when RLIMIT_DATA refuses it a thread's
// stack or a span, with no "out of memory" to say — ended at its memory
// limit: the evaluation's, not a crash of weir's (TestValidateSchema's
// 20,000-item bomb died so under a loaded CI, "sandbox worker died:
// SIGSEGV"). A worker that panics in Go code stays a crash.
func TestARuntimeSignalIsTheMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		limit  flows.Limit
	}{
		{`SIGSEGV: segmentation violation\nPC=0x4711 m=3 sigcode=1 addr=0x0\n`, flows.LimitMemory},
		{`fatal error: unexpected signal during runtime execution\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4711]\n`, flows.LimitMemory},
		{`panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation]\n`, ""},
	} {
		p, err := New(Config{Workers: 1, Command: []string{"/bin/sh", "-c", `head -c 4 >/dev/null; printf '` + tc.stderr + `' >&2; exit 2`}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Call(context.Background(), flows.Sources{Hash: "h"}, flows.Context{}, []flows.Call{{Ref: flows.CallableRef{Flow: "f", Node: "n", Param: "args"}}})
		p.Close()
		if got := flows.LimitOf(err); got != tc.limit || err == nil {
			t.Errorf("a worker dying with %q: %v (limit %q), want limit %q", tc.stderr, err, got, tc.limit)
		}
	}
}
