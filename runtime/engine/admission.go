package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/internal/clock"
)

// admissionGate is the gate new work passes (docs/design.md §5.1, §8.3, §8.8):
// acceptance holds it shared, closing it holds it exclusively, so once it
// is closed nothing new is reserved. It also answers the store's errors,
// since a storage fault is what closes it for good, and reads the disk's
// watermark on every admission.
type admissionGate struct {
	log   hclog.Logger
	clock clock.Clock
	cfg   *atomic.Pointer[Config] // the engine's, swapped by Reload

	gate      sync.RWMutex
	closed    string // "" open, else the refusal code
	closedWhy string
	// diskWarned is when the log last said the store's disk is full
	// (unix nanoseconds): every refused write would say it again.
	diskWarned atomic.Int64
}

// enter takes the gate shared for one acceptance and answers its refusal
// while admission is closed (then the gate is not held). A nil answer
// must be followed by leave.
func (a *admissionGate) enter() error {
	a.gate.RLock()
	if a.closed == "" {
		return nil
	}
	defer a.gate.RUnlock()
	if a.closed == CodeStorage {
		return &Error{Code: CodeStorage, Message: "admission is closed after a storage failure: " + a.closedWhy, Class: ClassStorage}
	}
	return protocolErr(a.closed, "admission is closed: %s", a.closedWhy)
}

// leave lets go of the gate enter took.
func (a *admissionGate) leave() { a.gate.RUnlock() }

// state is the refusal code and its reason, or "" while admission is open.
func (a *admissionGate) state() (code, why string) {
	a.gate.RLock()
	defer a.gate.RUnlock()
	return a.closed, a.closedWhy
}

// close closes the gate with a refusal code. The first reason sticks: a
// storage failure is not hidden by a later drain.
func (a *admissionGate) close(code, why string) {
	a.gate.Lock()
	defer a.gate.Unlock()
	if a.closed == "" {
		a.closed, a.closedWhy = code, why
		if code == CodeStorage {
			a.log.Error("admission closed", "code", code, "reason", why)
		} else {
			a.log.Info("admission closed", "code", code, "reason", why)
		}
	}
}

// diskWarnEvery spaces the log lines about a full disk.
const diskWarnEvery = 10 * time.Second

// storageFailed records that the store broke a promise: admission closes
// and stays closed until an operator restarts the daemon.
func (a *admissionGate) storageFailed(err error) *Error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller gave up (a cancelled run, a stop, a client gone):
		// the store kept its promise, admission stays open.
		return protocolErr(CodeBadRequest, "abandoned before the store answered: %v", err)
	}
	se := storageErr(err)
	if se.Class != ClassStorage {
		// One record's problem: the caller fails that run or request.
		a.log.Warn("store refused one record", "code", se.Code, "error", err)
		return se
	}
	if se.Code == CodeDiskFull {
		// The store is sound and refused before writing: the disk
		// watermark keeps new work out (see checkDisk) and the work in
		// hand tries again, until space returns.
		if last := a.diskWarned.Load(); a.clock.Now().UnixNano()-last >= int64(diskWarnEvery) && a.diskWarned.CompareAndSwap(last, a.clock.Now().UnixNano()) {
			a.log.Warn("the store refuses writes: its disk is full (said once per interval)", "interval", diskWarnEvery, "error", err)
		}
		return se
	}
	a.close(CodeStorage, se.Message)
	a.log.Error("storage fault", "incident", se.Incident, "error", err)
	se.Message = "admission is closed until an operator acts: " + se.Message
	return se
}

// readFailed answers a store error met while reading for a caller: a bad
// id is the caller's, anything else a storage error whose detail goes to
// the daemon log under its incident id, never to the caller. A failed
// read leaves admission as it is.
func (a *admissionGate) readFailed(err error) *Error {
	se := storageErr(err)
	if se.Class == ClassStorage {
		a.log.Error("store read failed", "incident", se.Incident, "error", err)
	}
	return se
}

// checkDisk refuses new work while the store's disk is below the
// watermark (Config.MinFreeBytes), before anything is written: the store
// keeps a reserve of its own below the watermark for the work in hand.
// It is read on every admission, so admission reopens by itself as soon
// as space returns.
func (a *admissionGate) checkDisk() *Error {
	c := a.cfg.Load()
	if c.MinFreeBytes <= 0 || c.DiskFree == nil {
		return nil
	}
	free, err := c.DiskFree()
	if err != nil {
		a.log.Warn("reading the disk's free space", "error", err)
		return nil // the store's own reserve still holds
	}
	if free >= c.MinFreeBytes {
		return nil
	}
	return &Error{Code: CodeDiskFull, Class: ClassStorage,
		Message: fmt.Sprintf("the store's disk has %s free, below the %s watermark (disk min_free): new runs and registrations are refused until space returns; runs in hand go on",
			Bytes(free), Bytes(c.MinFreeBytes))}
}
