// Package replay turns a finished (or parked) run into a regression test.
//
// A recording (a .weirrun file) holds everything one run decided with:
// the sources of the flow version it ran, its input, every step's end,
// every tool call's arguments and answer, every model turn's request
// digest and answer, every decision a person made on its waits, and the
// times. It holds nothing of the machine the run ran on: no plugin
// config, no environment. Record builds one from what a daemon serves;
// Write and Read give it its one documented format (docs/flows.md,
// "Testing flows with recordings"), versioned and checksummed so that a
// file from another weir, or one edited by hand, is refused instead of
// replayed wrongly.
//
// Replay runs the flow again — the recorded version or new sources — on
// an embedded engine over an in-memory store and a fake clock, whose
// tools are the recording itself: each call is answered by (node, visit,
// attempt, call) from what the run was answered, and no plugin, provider
// or network is ever reached, so a replay can make no effect, however
// the flow changed. It reports whether the run took the same path to the
// same output, or the first place it did not, at its file:line in the
// sources replayed.
//
// It lives apart from the engine because it is a user of the engine's
// public API (the Tools seam, Submit, DecideWait, Events), like weir exec:
// the engine does not know it is being replayed.
package replay
