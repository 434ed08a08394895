package script

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
)

// on_unknown and unknown_timeout reach the IR and survive its encoding;
// a task that says neither encodes as before.
func TestOnUnknownIR(t *testing.T) {
	t.Parallel()
	src := `flow(name = "f", nodes = [
    task("a", tool = "t.once", at_most_once = True, on_unknown = "ask", unknown_timeout = "2h", next = "b"),
    task("b", tool = "t.once", at_most_once = True, on_unknown = "ask", next = "c"),
    task("c", tool = "t.once", at_most_once = True),
])
`
	m := mustLoad(t, []flows.File{{Path: "x.star", Src: []byte(src)}})
	f := m.Flows[0]
	a, b, c := f.Node("a"), f.Node("b"), f.Node("c")
	if !a.Asks() || a.UnknownTimeout != 2*time.Hour || !b.Asks() || b.UnknownTimeout != 0 || c.Asks() || c.OnUnknown != "" {
		t.Fatalf("a %q %v, b %q %v, c %q", a.OnUnknown, a.UnknownTimeout, b.OnUnknown, b.UnknownTimeout, c.OnUnknown)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back flows.Node
	if err := json.Unmarshal(raw, &back); err != nil || back.OnUnknown != "ask" || back.UnknownTimeout != 2*time.Hour {
		t.Fatalf("decoded %q %v (%v) from %s", back.OnUnknown, back.UnknownTimeout, err, raw)
	}
	if raw, _ := json.Marshal(c); strings.Contains(string(raw), "unknown") {
		t.Errorf("a task that says neither encodes %s", raw)
	}
}

// A misspelt keyword stops the script with the parameter it likely meant.
func TestOnUnknownKeywordSuggested(t *testing.T) {
	t.Parallel()
	_, ds := Load([]flows.File{{Path: "x.star", Src: []byte(`flow(name = "f", nodes = [task("a", tool = "t.once", at_most_once = True, on_unknwn = "ask")])`)}})
	if len(ds) != 1 || !strings.Contains(ds[0].String(), "did you mean on_unknown?") {
		t.Fatalf("got %v, want a suggestion of on_unknown", ds)
	}
}

// A fanout of a tool and an agent carry on_unknown and unknown_timeout
// into the IR as a task does; one that says neither fails, as before.
func TestOnUnknownFanoutAgentIR(t *testing.T) {
	t.Parallel()
	src := `flow(name = "f", nodes = [
    fanout("a", items = [1, 2], tool = "t.once", at_most_once = True, width = 2, depth = 1, max_items = 2, on_unknown = "ask", unknown_timeout = "90m", next = "b"),
    agent("b", prompt = "p", model = "small", max_turns = 2, on_unknown = "ask", next = "c"),
    agent("c", prompt = "p", model = "small", max_turns = 2, on_unknown = "fail", next = "d"),
    fanout("d", items = [1], tool = "t.once", at_most_once = True, width = 1, depth = 1, max_items = 1),
])
`
	m := mustLoad(t, []flows.File{{Path: "x.star", Src: []byte(src)}})
	f := m.Flows[0]
	a, b, c, d := f.Node("a"), f.Node("b"), f.Node("c"), f.Node("d")
	if !a.Asks() || a.UnknownTimeout != 90*time.Minute || !b.Asks() || b.UnknownTimeout != 0 || c.Asks() || c.OnUnknown != flows.OnUnknownFail || d.Asks() {
		t.Fatalf("a %q %v, b %q %v, c %q, d %q", a.OnUnknown, a.UnknownTimeout, b.OnUnknown, b.UnknownTimeout, c.OnUnknown, d.OnUnknown)
	}
	for _, n := range []*flows.Node{a, b} {
		raw, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		var back flows.Node
		if err := json.Unmarshal(raw, &back); err != nil || back.OnUnknown != flows.OnUnknownAsk || back.UnknownTimeout != n.UnknownTimeout {
			t.Fatalf("%s decoded %q %v (%v) from %s", n.ID, back.OnUnknown, back.UnknownTimeout, err, raw)
		}
	}
}
