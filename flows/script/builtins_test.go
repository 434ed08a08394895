package script

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

// Every node builtin checks the parameters they share the same way: a
// negative max_visits and an error wire that names no node are refused,
// with the node's kind and id in front.
func TestNodeBuiltinsShareParameterChecks(t *testing.T) {
	t.Parallel()
	for kind, call := range map[string]string{
		"task":    `task("n", tool = "t", %s)`,
		"subflow": `subflow("n", flow = "leaf", %s)`,
		"fanout":  `fanout("n", items = [1], width = 1, depth = 1, max_items = 1, tool = "t", %s)`,
		"wait":    `wait("n", %s)`,
		"branch":  `branch("n", cond = lambda ctx: True, %s)`,
		"agent":   `agent("n", prompt = "p", model = "m", max_turns = 1, %s)`,
	} {
		src := fmt.Sprintf("flow(\"f\", nodes = [%s])\n", fmt.Sprintf(call, `max_visits = -1, error = ""`))
		_, ds := Load([]flows.File{flowtest.Src("f.star", src)})
		var got []string
		for _, d := range ds {
			if d.Code == flows.CodeInvalid {
				got = append(got, d.Message)
			}
		}
		want := []string{ // in the order written
			kind + ` "n": max_visits = -1, must not be negative`,
			kind + ` "n": error = "" names no node; leave it out (or None) to end the run there`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: got %q, want %q (all: %s)", kind, got, want, ds)
		}
	}
}
