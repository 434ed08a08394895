package store

import (
	"errors"
	"fmt"
	"strings"
)

// MaxIDBytes bounds every id and key part a backend stores. Several parts
// make one key, and Badger refuses keys over 65,000 bytes with an error
// that is not about the store's health; this bound keeps every key far
// below that, so an overlong id is refused as that id's problem. Callers
// at the edge (the API, registration) hold ids to tighter, documented
// limits of their own.
const MaxIDBytes = 4096

// ErrBadID: an id is empty, longer than MaxIDBytes or holds a NUL byte.
// Backends build keys from ids with NUL as the separator, so every backend
// refuses the same ids and a record that one backend stores, another can
// too. It is the error of the request that named the id, never a fault of
// the store.
var ErrBadID = errors.New("store: id is empty, too long or contains a NUL byte")

// ErrTooLarge: one Update writes more than one transaction of the backend
// holds. It is the error of the writer (one run's result, one request),
// never a fault of the store: nothing was written and the store is sound.
var ErrTooLarge = errors.New("store: write too large for one transaction")

// CheckID refuses ids that are empty, too long or hold a NUL byte; what
// names them in the error.
func CheckID(what string, ids ...string) error {
	for _, id := range ids {
		if id == "" || len(id) > MaxIDBytes || strings.Contains(id, "\x00") {
			return badID(what, id)
		}
	}
	return nil
}

// CheckPart is CheckID for optional key parts, which may be empty.
func CheckPart(what string, part string) error {
	if len(part) > MaxIDBytes || strings.Contains(part, "\x00") {
		return badID(what, part)
	}
	return nil
}

// badID names the refused id by its length and a short prefix: the error
// may be logged, and a whole id of thousands of bytes is no help there.
func badID(what, id string) error {
	const show = 32
	if len(id) > show {
		return fmt.Errorf("%w: %s of %d bytes starting %q", ErrBadID, what, len(id), id[:show])
	}
	return fmt.Errorf("%w: %s %q", ErrBadID, what, id)
}

// CheckRun refuses a run whose id or indexed fields no backend could key.
func CheckRun(r *Run) error {
	if err := CheckID("run id", r.ID); err != nil {
		return err
	}
	return errors.Join(CheckPart("owner", r.Owner), CheckPart("phase", string(r.Phase)), CheckPart("parent run id", r.ParentRunID))
}
