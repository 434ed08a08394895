package store

import (
	"errors"
	"fmt"
	"time"
)

// ServiceLease is the record a service holds to be the one daemon of a
// fleet doing a fleet-wide job — schedules, retention sweeps, redrive
// batches (DESIGN §12). Fence grows each time the lease changes hands, so
// a write made under an old holding is refused (CheckServiceLease) even
// if its daemon does not know yet that it lost the lease.
type ServiceLease struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder"`
	Fence   uint64    `json:"fence"`
	Expires time.Time `json:"expires"`
}

// ErrFenced: a service's write carries a fence that is no longer the
// lease's (another daemon took it, or it expired).
var ErrFenced = errors.New("store: service lease held by another or expired")

// NextServiceLease decides a take of the lease named name by holder at
// now, for ttl, given the current record (nil: none yet). A lease that is
// free (none, or expired) is taken with the next fence; holder's own
// lease, unexpired, is renewed with the same fence; another's unexpired
// lease is not taken (ok false, cur returned).
func NextServiceLease(cur *ServiceLease, name, holder string, now time.Time, ttl time.Duration) (next *ServiceLease, ok bool) {
	switch {
	case cur == nil:
		return &ServiceLease{Name: name, Holder: holder, Fence: 1, Expires: now.Add(ttl)}, true
	case cur.Holder == holder && now.Before(cur.Expires):
		return &ServiceLease{Name: name, Holder: holder, Fence: cur.Fence, Expires: now.Add(ttl)}, true
	case now.Before(cur.Expires):
		return cur, false
	}
	return &ServiceLease{Name: name, Holder: holder, Fence: cur.Fence + 1, Expires: now.Add(ttl)}, true
}

// TakeServiceLease takes or renews the lease named name for holder in tx
// (NextServiceLease decides); ok false means another daemon holds it, and
// the lease returned is theirs. The transaction's isolation makes two
// daemons taking at once end with one holder.
func TakeServiceLease(tx Tx, name, holder string, now time.Time, ttl time.Duration) (l *ServiceLease, ok bool, err error) {
	if holder == "" || ttl <= 0 {
		return nil, false, fmt.Errorf("store: service lease %q: a holder and a positive ttl are required", name)
	}
	cur, err := tx.ServiceLeaseGet(name)
	switch {
	case errors.Is(err, ErrNotFound):
		cur = nil
	case err != nil:
		return nil, false, err
	}
	next, ok := NextServiceLease(cur, name, holder, now, ttl)
	if !ok {
		return next, false, nil
	}
	if err := tx.ServiceLeasePut(next); err != nil {
		return nil, false, err
	}
	return next, true, nil
}

// CheckServiceLease is the fence of a service's write: it fails with
// ErrFenced unless holder holds the lease named name with fence, unexpired
// at now. A service calls it in every transaction that does its job, so
// the write commits only under the holding it was decided under.
func CheckServiceLease(tx Tx, name, holder string, fence uint64, now time.Time) error {
	cur, err := tx.ServiceLeaseGet(name)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("service lease %q: %w", name, ErrFenced)
	}
	if err != nil {
		return err
	}
	if cur.Holder != holder || cur.Fence != fence || !now.Before(cur.Expires) {
		return fmt.Errorf("service lease %q is %s's (fence %d) until %s, not %s's fence %d: %w",
			name, cur.Holder, cur.Fence, cur.Expires.Format(time.RFC3339), holder, fence, ErrFenced)
	}
	return nil
}

// ReleaseServiceLease gives the lease up at once (a daemon that drains),
// if holder still holds it with fence: it expires now, so the next take
// by anyone succeeds. Releasing a lease held by another does nothing.
func ReleaseServiceLease(tx Tx, name, holder string, fence uint64, now time.Time) error {
	cur, err := tx.ServiceLeaseGet(name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.Holder != holder || cur.Fence != fence {
		return nil
	}
	released := *cur
	released.Expires = now
	return tx.ServiceLeasePut(&released)
}
