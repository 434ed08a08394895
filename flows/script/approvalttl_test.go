package script

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
)

// An agent's approval_ttl reaches the IR and survives its encoding; one
// that does not parse, is not positive or bounds no approval is refused
// at registration, at its line.
func TestAgentApprovalTTL(t *testing.T) {
	t.Parallel()
	src := `flow(name = "f", nodes = [
    agent("a", prompt = "p", model = "small", max_turns = 2, tools = ["mail.send"], approve = ["mail.send"], approval_ttl = "15m", next = "b"),
    agent("b", prompt = "p", model = "small", max_turns = 2, tools = ["mail.send"], approve = ["mail.send"]),
])
`
	m, ds := Load([]flows.File{{Path: "x.star", Src: []byte(src)}})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	a, b := m.Flows[0].Node("a"), m.Flows[0].Node("b")
	if a.ApprovalTTL != 15*time.Minute || b.ApprovalTTL != 0 {
		t.Fatalf("a %v, b %v", a.ApprovalTTL, b.ApprovalTTL)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back flows.Node
	if err := json.Unmarshal(raw, &back); err != nil || back.ApprovalTTL != 15*time.Minute {
		t.Fatalf("decoded %v (%v) from %s", back.ApprovalTTL, err, raw)
	}
	if raw, _ := json.Marshal(b); strings.Contains(string(raw), "approval_ttl") {
		t.Errorf("an agent that says none encodes %s", raw)
	}
	for _, c := range []struct{ ttl, approve, want string }{
		{`"soon"`, `["mail.send"]`, "approval_ttl: "},
		{`"-5m"`, `["mail.send"]`, "must be positive"},
		{`"0s"`, `["mail.send"]`, "must be positive"},
		{`"5m"`, `[]`, "this agent approves none"},
	} {
		src := `flow(name = "f", nodes = [
    agent("a", prompt = "p", model = "small", max_turns = 2, tools = ["mail.send"], approve = ` + c.approve + `, approval_ttl = ` + c.ttl + `),
])
`
		_, ds := Load([]flows.File{{Path: "x.star", Src: []byte(src)}})
		if len(ds) != 1 || ds[0].Code != flows.CodeInvalid || !strings.Contains(ds[0].String(), c.want) || ds[0].Pos.Line != 2 {
			t.Errorf("approval_ttl = %s, approve = %s: %v, want one %s saying %q at line 2", c.ttl, c.approve, ds, flows.CodeInvalid, c.want)
		}
	}
}
