package replay

import (
	"context"
	"testing"

	"github.com/weirhq/weir/internal/flowgen"
)

// BenchmarkReplay100Steps replays a recorded run of 100 tool steps: an
// embedded engine started, the version registered, every call answered
// from the recording, the path compared. BenchmarkLive100Steps runs the
// same flow live on the same engine layer with in-process tools, for the
// ratio.
func BenchmarkReplay100Steps(b *testing.B) {
	rec := record(b, flowgen.Chain("chain", 100, "kit.echo"), `{}`).rec
	b.ResetTimer()
	for b.Loop() {
		res, err := Replay(context.Background(), rec, Options{})
		if err != nil || !res.Pass {
			b.Fatalf("replay: %v %+v", err, res)
		}
	}
}

func BenchmarkLive100Steps(b *testing.B) {
	src := flowgen.Chain("chain", 100, "kit.echo")
	for b.Loop() {
		runLive(b, src, `{}`)
	}
}
