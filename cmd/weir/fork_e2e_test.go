package main

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// TestRunFork: weir run fork refuses to repeat an at-most-once call
// unless allowed, forks past it with a new input, makes one fork per
// request id, and run get and run ls --lineage show the family.
func TestRunFork(t *testing.T) {
	d := servingDaemon(t)
	d.register(`
flow(name = "forky", nodes = [
    task("a", tool = "testkit.echo", args = lambda ctx: {"n": ctx.input["n"]}, next = "b"),
    task("b", tool = "testkit.exclusive", args = {"ms": 0}, at_most_once = True, next = "c"),
    task("c", tool = "testkit.echo", args = lambda ctx: {"a": ctx.results["a"]["n"], "n": ctx.input["n"]}),
])
`)
	res, err := d.startRun("forky", `{"n": 1}`, "")
	if err != nil {
		t.Fatal(err)
	}
	src := res.RunID
	if v := d.waitTerminal(src); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("source ended %s", v.Phase)
	}
	code, out, errb := d.cli("run", "fork", src, "--from", "b")
	if code != 1 || !strings.Contains(errb, "E_FORK_EFFECTS") || !strings.Contains(errb, "testkit.exclusive") {
		t.Fatalf("fork before an at-most-once call: exit %d\n%s%s", code, out, errb)
	}
	code, out, errb = d.cli("run", "fork", src, "--from", "c", "--input", `{"n": 2}`, "--reason", "try n=2")
	if code != 0 || !strings.Contains(out, "copied:    a, b") || !strings.Contains(out, "runs again: c") {
		t.Fatalf("fork past it: exit %d\n%s%s", code, out, errb)
	}
	fork := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if v := d.waitTerminal(fork); v.Phase != apitypes.PhaseCompleted || string(v.Output) != `{"a":1,"n":2}` {
		t.Fatalf("fork ended %s with %s", v.Phase, v.Output)
	}
	code, out, _ = d.cli("run", "get", fork)
	if code != 0 || !strings.Contains(out, "forked from: "+src+" at c@1") || !strings.Contains(out, "started by: fork:"+src+":c@1") {
		t.Fatalf("run get of the fork: exit %d\n%s", code, out)
	}
	var again []string
	for range 2 {
		code, out, errb = d.cli("run", "fork", src, "--from", "b@1", "--allow-effects", "--request-id", "once")
		if code != 0 || !strings.Contains(out, "at-most-once again:") && !strings.Contains(out, "made before") {
			t.Fatalf("allowed fork: exit %d\n%s%s", code, out, errb)
		}
		again = append(again, strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]))
	}
	if again[0] != again[1] || !strings.Contains(out, "made before") {
		t.Fatalf("one request id made forks %v\n%s", again, out)
	}
	code, out, _ = d.cli("run", "ls", "--lineage", fork)
	if code != 0 || !strings.HasPrefix(out, "RUN ") || !strings.Contains(out, src) || !strings.Contains(out, fork) || !strings.Contains(out, again[0]) {
		t.Fatalf("lineage: exit %d\n%s", code, out)
	}
	if code, _, errb := d.cli("run", "fork", src); code != 2 || !strings.Contains(errb, "--from") {
		t.Fatalf("no --from: exit %d %s", code, errb)
	}
	if code, _, errb := d.cli("run", "fork", src, "--from", "zz"); code != 1 || !strings.Contains(errb, "E_FORK_POINT") {
		t.Fatalf("no such node: exit %d %s", code, errb)
	}
	d.stop()
}
