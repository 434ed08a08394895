// Package weirtest makes recorded runs regression tests of go test: a
// repository keeps a folder of .weirrun files (weir run export) beside its
// flows, and a test replays each against the flow's current code, with no
// daemon, plugin or provider, failing at the first divergence with its
// file:line. It is weir test (cmd/weir) for code that already has a Go
// test suite.
package weirtest

import (
	"testing"

	"github.com/weirhq/weir/runtime/replay"
)

// Options are replay.Options: the flow files to replay instead of the
// recorded sources, and the wall-time bound.
type Options = replay.Options

// Replay replays the recording in file and fails t, at the divergence's
// file:line, if the run would now take another path or end otherwise; a
// file that cannot be replayed (no recording, another format version, a
// failed checksum, flow files that do not register) fails t too. It
// returns the result for further assertions.
func Replay(t testing.TB, file string, opts Options) *replay.Result {
	t.Helper()
	rec, err := replay.ReadFile(file)
	if err != nil {
		t.Fatalf("weirtest: %v", err)
	}
	res, err := replay.Replay(t.Context(), rec, opts)
	if err != nil {
		t.Fatalf("weirtest: %s: %v", file, err)
	}
	if !res.Pass {
		t.Errorf("weirtest: %s: run %s of %s diverged: %s", file, res.Run, res.Flow, res.Divergence)
	}
	return res
}
