package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxIDBytes bounds every id and key part a backend stores. Several parts
// make one key: Badger refuses keys over 65,000 bytes, and a PostgreSQL
// index entry holds at most 2,704 bytes, in both cases with an error that
// is not about the store's health. Two parts at this bound and a few
// numbers fit one PostgreSQL index entry, so an overlong id is refused as
// that id's problem by every backend alike. Callers at the edge (the API,
// registration) hold ids to tighter, documented limits of their own.
const MaxIDBytes = 1024

// ErrBadID: an id is empty, longer than MaxIDBytes, holds a NUL byte or
// is not UTF-8. Backends build keys from ids with NUL as the separator,
// and PostgreSQL text holds neither NUL nor invalid UTF-8, so every
// backend refuses the same ids and a record that one backend stores,
// another can too. It is the error of the request that named the id,
// never a fault of the store.
var ErrBadID = errors.New("store: id is empty, too long, not UTF-8 or contains a NUL byte")

// ErrTooLarge: one Update writes more than one transaction of the backend
// holds. It is the error of the writer (one run's result, one request),
// never a fault of the store: nothing was written and the store is sound.
var ErrTooLarge = errors.New("store: write too large for one transaction")

// CheckID refuses ids that are empty, too long, not UTF-8 or hold a NUL
// byte; what names them in the error.
func CheckID(what string, ids ...string) error {
	for _, id := range ids {
		if id == "" || !validPart(id) {
			return badID(what, id)
		}
	}
	return nil
}

// CheckPart is CheckID for optional key parts, which may be empty.
func CheckPart(what string, part string) error {
	if !validPart(part) {
		return badID(what, part)
	}
	return nil
}

// validPart reports whether s can be (part of) a key in every backend.
func validPart(s string) bool {
	return len(s) <= MaxIDBytes && !strings.Contains(s, "\x00") && utf8.ValidString(s)
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
	return errors.Join(CheckPart("owner", r.Owner), CheckPart("phase", string(r.Phase)), CheckPart("parent run id", r.ParentRunID),
		CheckPart("flow", r.Flow), CheckPart("version", r.Version), CheckPart("position", r.Position))
}

// CheckTask refuses a task whose id, run id or wait child no backend
// could key.
func CheckTask(tk *Task) error {
	if err := CheckID("task id", tk.ID); err != nil {
		return err
	}
	if err := CheckID("task run id", tk.RunID); err != nil {
		return err
	}
	if err := CheckPart("task owner", tk.Owner); err != nil {
		return err
	}
	return CheckPart("wait child", tk.WaitChild)
}

// CheckDedup refuses a dedup record whose owner or request id no backend
// could key.
func CheckDedup(d *Dedup) error {
	if err := CheckPart("owner", d.Owner); err != nil {
		return err
	}
	return CheckID("request id", d.RequestID)
}

// CheckDeadLetter refuses a dead letter whose task id or owner no backend
// could key.
func CheckDeadLetter(d *DeadLetter) error {
	if err := CheckID("dead letter task id", d.TaskID); err != nil {
		return err
	}
	return CheckPart("owner", d.Owner)
}

// CheckCohortItem refuses a cohort item whose run or node no backend could
// key, or whose index is negative.
func CheckCohortItem(it *CohortItem) error {
	err := CheckID("cohort item run/node", it.RunID, it.Node)
	if err == nil && it.Index < 0 {
		err = fmt.Errorf("cohort item index %d: must not be negative", it.Index)
	}
	return err
}

// CheckAgentTurn refuses an agent turn whose run or node no backend could
// key, or whose turn is not numbered from 1.
func CheckAgentTurn(at *AgentTurn) error {
	err := CheckID("agent turn run/node", at.RunID, at.Node)
	if err == nil && at.Turn < 1 {
		err = fmt.Errorf("agent turn %d: turns are numbered from 1", at.Turn)
	}
	return err
}

// CheckTaskClaim refuses a claim that names no lease, more than MaxClaim,
// or a lease without a valid task id.
func CheckTaskClaim(p TaskClaimParams) error {
	if len(p.Leases) > MaxClaim {
		return fmt.Errorf("%w: a claim names %d tasks, more than %d", ErrTooLarge, len(p.Leases), MaxClaim)
	}
	for _, l := range p.Leases {
		if l == nil {
			return fmt.Errorf("%w: a claim names a nil lease", ErrBadID)
		}
		if err := CheckID("lease task id", l.TaskID); err != nil {
			return err
		}
	}
	return nil
}
