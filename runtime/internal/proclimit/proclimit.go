// Package proclimit puts OS limits on child processes the runtime starts
// and does not trust: plugins (runtime/host) and sandbox workers
// (runtime/sandbox). Limits are set with prlimit on the started process,
// so the parent needs no fork hook; the child runs nothing of the
// untrusted input before its parent has set them.
//
// Memory is capped with RLIMIT_DATA, not RLIMIT_AS: a Go program reserves
// far more address space than it uses, and dies at start under an
// RLIMIT_AS it would never fill.
package proclimit
