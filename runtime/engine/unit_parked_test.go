package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storetest"
)

const parkedSrc = `
flow(name = "deploy", nodes = [
    task("a", tool = "kit.echo", args = {"x": 1}, next = "hold"),
    wait("hold", timeout = "1h", next = "b"),
    task("b", tool = "kit.echo", args = {"y": 2}),
])
`

// parkedRuns starts n runs of deploy and waits until each is parked at
// its hold.
func (b *testBundle) parkedRuns(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.start(t, "deploy", `{}`, "")
	}
	for _, id := range ids {
		b.wait(t, id, "parked", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	}
	return ids
}

// registerWarnings registers src and returns its W_PARKED_INCOMPATIBLE
// warnings; any other diagnostic fails the test.
func (b *testBundle) registerWarnings(t *testing.T, src string) []flows.Diagnostic {
	t.Helper()
	res, err := b.eng.Register(context.Background(), []SourceFile{{Path: "next.star", Src: src}})
	if err != nil {
		t.Fatal(err)
	}
	var ws []flows.Diagnostic
	for _, d := range res.Diagnostics {
		if d.Code != CodeParkedIncompatible || d.Severity != flows.SeverityWarning {
			t.Fatalf("registration: %s", d)
		}
		ws = append(ws, d)
	}
	if len(res.Flows) != 1 {
		t.Fatalf("registered %+v", res.Flows)
	}
	return ws
}

// Registration reports each kind of change for the parked runs of the
// older version: an added node fits; a removed node the runs hold a
// result of, a renamed wait they are parked at, and a node that now calls
// another tool do not, each named with the runs (at most
// maxParkedRunIDs, with the count) and the reason. The runs stay parked
// on their own version.
func TestUnitRegisterReportsParkedRuns(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, parkedSrc)
	ids := b.parkedRuns(t, maxParkedRunIDs+2)
	v1 := b.runRecord(t, ids[0]).Version
	if ws := b.registerWarnings(t, strings.Replace(parkedSrc, `task("b", tool = "kit.echo", args = {"y": 2}),`,
		`task("b", tool = "kit.echo", args = {"y": 2}, next = "c"), task("c", tool = "kit.echo", args = {"z": 3}),`, 1)); len(ws) != 0 {
		t.Fatalf("an added node: %s", ws)
	}
	for _, tc := range []struct {
		name, old, new, why string
	}{
		{"removed node", `task("a", tool = "kit.echo", args = {"x": 1}, next = "hold"),
    wait("hold"`, `wait("hold"`, "a: the new version has no node a"},
		{"renamed wait", `"hold"`, `"review"`, "hold: the run is parked at hold, which the new version does not have"},
		{"another tool", `tool = "kit.echo", args = {"x": 1}`, `tool = "kit.fail", args = {"times": 0}`, `a: its result was made by tool "kit.echo"; the new version calls "kit.fail"`},
	} {
		ws := b.registerWarnings(t, strings.ReplaceAll(parkedSrc, tc.old, tc.new))
		if len(ws) != 1 {
			t.Fatalf("%s: warnings %s", tc.name, ws)
		}
		msg := ws[0].Message
		if !strings.Contains(msg, fmt.Sprintf("%d parked run(s) of flow deploy's version %s", len(ids), shortHash(v1))) ||
			!strings.Contains(msg, tc.why) || !strings.Contains(msg, " and 2 more") || ws[0].Pos.Line == 0 {
			t.Errorf("%s: %s", tc.name, ws[0])
		}
		named := 0
		for _, id := range ids {
			if strings.Contains(msg, id) {
				named++
			}
		}
		if named != maxParkedRunIDs {
			t.Errorf("%s: names %d runs, want %d: %s", tc.name, named, maxParkedRunIDs, msg)
		}
	}
	for _, id := range ids {
		if r := b.runRecord(t, id); r.Version != v1 || r.Phase != store.PhaseWaiting {
			t.Errorf("run %s: %s on %s after the registrations", id, r.Phase, r.Version)
		}
	}
}

// Runs parked before their Position was kept are read one by one and
// reported like the others; runs of the version registered are never
// reported.
func TestUnitRegisterReportsUnplacedParkedRuns(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, parkedSrc)
	ids := b.parkedRuns(t, 2)
	if err := b.st.Update(context.Background(), func(tx store.Tx) error {
		return storetest.ChangeRun(tx, ids[0], func(r *store.Run) { r.Position = "" })
	}); err != nil {
		t.Fatal(err)
	}
	renamed := strings.ReplaceAll(parkedSrc, `"hold"`, `"review"`)
	ws := b.registerWarnings(t, renamed)
	if len(ws) != 1 || !strings.Contains(ws[0].Message, "2 parked run(s)") || !strings.Contains(ws[0].Message, ids[0]) || !strings.Contains(ws[0].Message, ids[1]) {
		t.Fatalf("warnings %s", ws)
	}
	// The version registered again: its own parked runs are none, the
	// older version's are reported again.
	late := b.start(t, "deploy", `{}`, "")
	b.wait(t, late, "parked", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	ws = b.registerWarnings(t, renamed)
	if len(ws) != 1 || strings.Contains(ws[0].Message, late) {
		t.Fatalf("again: %s", ws)
	}
}

// Past maxParkedCounted runs in one group the count is a lower bound,
// and said to be one.
func TestUnitRegisterBoundsTheParkedCount(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, parkedSrc)
	b.parkedRuns(t, maxParkedCounted+1)
	ws := b.registerWarnings(t, strings.ReplaceAll(parkedSrc, `"hold"`, `"review"`))
	want := fmt.Sprintf("at least %d parked run(s)", maxParkedCounted)
	if len(ws) != 1 || !strings.Contains(ws[0].Message, want) || !strings.Contains(ws[0].Message, fmt.Sprintf("and at least %d more", maxParkedCounted-maxParkedRunIDs)) {
		t.Fatalf("warnings %s, want %q", ws, want)
	}
}

const callerSrc = `
flow(name = "child", input = {"type": "object"}, nodes = [
    wait("hold", timeout = "1h", next = "work"),
    task("work", tool = "kit.echo", args = {"done": True}),
])

flow(name = "parent", nodes = [
    wait("hold", timeout = "1h", next = "call"),
    subflow("call", flow = "child", args = lambda ctx: {"n": 1}),
])

flow(name = "calling", nodes = [
    subflow("call", flow = "child", args = lambda ctx: {"n": 1}),
])
`

// A subflow's new version whose input schema changed warns of the parked
// runs of its callers that will start it (a parent parked before its
// subflow node), not of one parked at its subflow node waiting on the
// child it started (that child runs on its own version, and fits the new
// one); one whose input schema did not change warns of none.
func TestUnitRegisterReportsParkedCallers(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, callerSrc)
	id := b.start(t, "parent", `{}`, "")
	calling := b.start(t, "calling", `{}`, "")
	for _, r := range []string{id, calling} {
		b.wait(t, r, "parked", func(r *store.Run) bool { return r.Phase == store.PhaseWaiting })
	}
	child := func(input, args string) string {
		return `flow(name = "child", input = ` + input + `, nodes = [wait("hold", timeout = "1h", next = "work"), task("work", tool = "kit.echo", args = ` + args + `)])`
	}
	if ws := b.registerWarnings(t, child(`{"type": "object"}`, `{"done": False}`)); len(ws) != 0 {
		t.Fatalf("the same input schema: %s", ws)
	}
	ws := b.registerWarnings(t, child(`{"type": "object", "required": ["m"]}`, `{"done": False}`))
	if len(ws) != 1 || !strings.Contains(ws[0].Message, "1 parked run(s) of flow parent's version") || !strings.Contains(ws[0].Message, "will call flow child's new version ("+id+")") ||
		!strings.Contains(ws[0].Message, "call: starts flow child, whose input schema this version changes") {
		t.Fatalf("a changed input schema: %s", ws)
	}
}
