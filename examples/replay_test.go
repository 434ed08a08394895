package examples

import (
	"os"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/replay/weirtest"
)

// TestRecordedAgentRunReplays: agents/testdata/morning.weirrun is a run
// of the demo's scheduled agent, exported from `make demo`'s daemon (the
// llm plugin over the scripted model server) with weir run export. It
// replays against agents/morning.star as the file is now, with no plugin
// or model: a change to the flow that would make the run go otherwise (a
// new prompt, say) fails here until the run is recorded again.
func TestRecordedAgentRunReplays(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("agents/morning.star")
	if err != nil {
		t.Fatal(err)
	}
	res := weirtest.Replay(t, "agents/testdata/morning.weirrun", weirtest.Options{Files: []apitypes.SourceFile{{Path: "agents/morning.star", Src: string(src)}}})
	if res.Steps != 1 || res.Calls != 1 || res.Phase != "completed" {
		t.Errorf("replayed %d steps, %d calls, ended %s; the run was one agent turn, completed", res.Steps, res.Calls, res.Phase)
	}
}
