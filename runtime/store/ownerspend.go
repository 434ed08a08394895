package store

import (
	"errors"
	"fmt"
)

// OwnerSpend is what one owner's runs were charged in one minute by one
// daemon: the durable spend window that budget_per_hour is checked
// against (DESIGN §12, "per-owner counters are durable"). It is added to
// in the transaction that charges a run, so it never disagrees with the
// runs' own Spent; a fleet shares it through the store, and a restart
// keeps it. Each daemon adds to rows of its own Host, so daemons charging
// one owner at once never write the same row.
type OwnerSpend struct {
	Owner string `json:"owner"`
	// Minute is the charge's minute, in Unix minutes.
	Minute int64  `json:"minute"`
	Host   string `json:"host"`
	// Cost is the sum charged; OwnerSpendAdd adds to it.
	Cost int64 `json:"cost"`
}

// OwnerSpendListParams selects OwnerSpendList's rows: one owner's (or,
// with Owner "", every owner's) from minute Since on, ordered by owner,
// minute and host.
type OwnerSpendListParams struct {
	Owner string
	Since int64
}

// OwnerSpendTx is the spend window's part of a Tx.
type OwnerSpendTx interface {
	// OwnerSpendAdd adds s.Cost (> 0) to the row of (s.Owner, s.Minute,
	// s.Host), making it if there is none.
	OwnerSpendAdd(s OwnerSpend) error
	OwnerSpendList(p OwnerSpendListParams) ([]OwnerSpend, error)
	// OwnerSpendPrune removes the rows of minutes before before and
	// returns how many it removed.
	OwnerSpendPrune(before int64) (int, error)
}

// ErrBadSpend: an OwnerSpendAdd of a cost that is not positive.
var ErrBadSpend = errors.New("store: a spend's cost must be positive")

// CheckOwnerSpend refuses an OwnerSpendAdd whose owner or host cannot be
// a key part or whose cost is not positive: the same in every backend.
func CheckOwnerSpend(s OwnerSpend) error {
	if err := CheckPart("owner", s.Owner); err != nil {
		return err
	}
	if err := CheckPart("host", s.Host); err != nil {
		return err
	}
	if s.Cost <= 0 {
		return fmt.Errorf("%w: %d charged to %q", ErrBadSpend, s.Cost, s.Owner)
	}
	return nil
}
