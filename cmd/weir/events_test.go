package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// Event details print as JSON (never Go's map syntax), plain words bare,
// and the time with its full date.
func TestPrintEventsShowsJSONAndDates(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.FixedZone("x", 3600))
	var b bytes.Buffer
	printEvents(&b, []apitypes.Event{{At: at, Type: "node_completed", Attempt: 2, Node: "n", Detail: map[string]any{
		"result": map[string]any{"a": []any{1.0, "two"}},
		"tool":   "testkit.echo",
		"reason": "not now",
		"empty":  "",
		"n":      3.0,
		"flag":   true,
	}}})
	want := `2026-03-04T04:06:07.891000Z  node_completed   attempt 2  node n  empty=""  flag=true  n=3  reason="not now"  result={"a":[1,"two"]}  tool=testkit.echo` + "\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}
