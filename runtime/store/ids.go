package store

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadID: an id is empty or holds a NUL byte. Backends build keys from
// ids with NUL as the separator, so every backend refuses the same ids and
// a record that one backend stores, another can too.
var ErrBadID = errors.New("store: id is empty or contains a NUL byte")

// CheckID refuses ids that are empty or hold a NUL byte; what names them
// in the error.
func CheckID(what string, ids ...string) error {
	for _, id := range ids {
		if id == "" || strings.Contains(id, "\x00") {
			return fmt.Errorf("%w: %s %q", ErrBadID, what, id)
		}
	}
	return nil
}

// CheckPart is CheckID for optional key parts, which may be empty.
func CheckPart(what string, part string) error {
	if strings.Contains(part, "\x00") {
		return fmt.Errorf("%w: %s %q", ErrBadID, what, part)
	}
	return nil
}

// CheckRun refuses a run whose id or indexed fields no backend could key.
func CheckRun(r *Run) error {
	if err := CheckID("run id", r.ID); err != nil {
		return err
	}
	return errors.Join(CheckPart("owner", r.Owner), CheckPart("phase", string(r.Phase)), CheckPart("parent run id", r.ParentRunID))
}
