package replay

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// chainFlow is a flow of n tasks, each calling kit.echo on the result of
// the one before.
func chainFlow(n int) string {
	var b strings.Builder
	b.WriteString("flow(name = \"chain\", nodes = [\n")
	for i := range n {
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next = \"s%d\"", i+1)
		}
		fmt.Fprintf(&b, "    task(\"s%d\", tool = \"kit.echo\", args = {\"i\": %d}%s),\n", i, i, next)
	}
	b.WriteString("])\n")
	return b.String()
}

// BenchmarkReplay100Steps replays a recorded run of 100 tool steps: an
// embedded engine started, the version registered, every call answered
// from the recording, the path compared. BenchmarkLive100Steps runs the
// same flow live on the same engine layer with in-process tools, for the
// ratio.
func BenchmarkReplay100Steps(b *testing.B) {
	rec := record(b, chainFlow(100), `{}`).rec
	b.ResetTimer()
	for b.Loop() {
		res, err := Replay(context.Background(), rec, Options{})
		if err != nil || !res.Pass {
			b.Fatalf("replay: %v %+v", err, res)
		}
	}
}

func BenchmarkLive100Steps(b *testing.B) {
	src := chainFlow(100)
	for b.Loop() {
		runLive(b, src, `{}`)
	}
}
