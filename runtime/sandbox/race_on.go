//go:build race

package sandbox

// raceBuild: this binary is race-instrumented. ThreadSanitizer maps
// gigabytes of shadow memory at start, so it cannot run under
// RLIMIT_DATA; a pool that starts this binary as its worker (tests run
// in-process) leaves the memory cap off. Tests of the cap start the weir
// binary instead (Config.Command).
const raceBuild = true
