// Package panics turns a panic in a library that works on user data (the
// MCP SDK given a flow's input schema, a graph renderer given a flow) into
// that user's error. weir promises that one user's flow cannot take the
// daemon or a shared server down for everyone; a library's panic is a bug
// in the library or an input it did not expect, and in both cases the
// item being worked on is what fails, not the process.
package panics

import (
	"fmt"
	"runtime/debug"

	"github.com/weirhq/weir/internal/escape"
)

// MaxValueBytes bounds the text of a panic's value in an Error: a panic
// value may quote the user data it choked on (a whole schema, a doc).
const MaxValueBytes = 512

// maxStackBytes bounds the stack kept for a log line.
const maxStackBytes = 4096

// Error is a panic caught by Catch.
type Error struct {
	// What names the work that panicked ("offering flow x as a tool").
	What string
	// Value is the panic's value as text, cut at MaxValueBytes.
	Value string
	// Stack is where it panicked, cut at a few KiB: for the log, never for
	// the user.
	Stack string
}

// Error says what panicked and why, bounded.
func (e *Error) Error() string { return e.What + " panicked: " + e.Value }

// Catch calls f and returns its error, or an *Error if f panics. The
// panic goes no further: whatever f had half done is the caller's to
// discard (f should work on something of its own until it returns).
func Catch(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{
				What:  what,
				Value: escape.Cut(fmt.Sprint(r), MaxValueBytes),
				Stack: escape.Cut(string(debug.Stack()), maxStackBytes),
			}
		}
	}()
	return f()
}
