package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// TestTurnWriter: a turn's text prints as it comes under a line naming
// it; another turn, the same turn started over, or its text going on
// after an event, gets its line again; whatever prints next starts on a
// line of its own.
func TestTurnWriter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tw := &turnWriter{w: &out}
	d := func(node string, turn, offset int, text string) apitypes.TurnDelta {
		return apitypes.TurnDelta{Node: node, Visit: 1, Turn: turn, Offset: offset, Text: text}
	}
	tw.delta(d("a", 1, 0, "One "))
	tw.delta(d("a", 1, 4, "two"))
	tw.endLine()
	out.WriteString("event\n")
	tw.delta(d("a", 1, 7, " three\n"))
	tw.delta(d("b", 1, 0, "Bee"))
	tw.delta(d("a", 1, 0, "Again"))
	tw.endLine()
	tw.endLine()
	want := "a@1 turn 1:\nOne two\nevent\na@1 turn 1:\n three\nb@1 turn 1:\nBee\na@1 turn 1:\nAgain\n"
	if out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}

func TestWatchNodeNeedsTokens(t *testing.T) {
	t.Parallel()
	code, _, errb, _ := run(t, map[string]string{"WEIR_DATA": t.TempDir()}, "run", "watch", "run_x", "--node", "a")
	if code == 0 || !strings.Contains(errb, "--node needs --tokens") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}
