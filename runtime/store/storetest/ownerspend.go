package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

// testOwnerSpend: OwnerSpendAdd sums into one row per owner, minute and
// host (read back inside the transaction that added), lists one owner's
// window or everyone's in order, prunes old minutes, and refuses bad
// input writing nothing.
func testOwnerSpend(t *testing.T, s store.Store, _ Opener) {
	add := func(tx store.Tx, owner string, minute int64, host string, cost int64) error {
		return tx.OwnerSpendAdd(store.OwnerSpend{Owner: owner, Minute: minute, Host: host, Cost: cost})
	}
	show := func(rows []store.OwnerSpend) []string {
		out := []string{}
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%s/%d/%s=%d", r.Owner, r.Minute, r.Host, r.Cost))
		}
		return out
	}
	update(t, s, func(tx store.Tx) error {
		for _, a := range []struct {
			owner  string
			minute int64
			host   string
			cost   int64
		}{{"alice", 100, "h1", 5}, {"alice", 100, "h1", 7}, {"alice", 100, "h2", 1}, {"alice", 160, "h1", 2}, {"bob", 99, "", 3}, {"", 101, "h1", 4}} {
			if err := add(tx, a.owner, a.minute, a.host, a.cost); err != nil {
				return err
			}
		}
		rows, err := tx.OwnerSpendList(store.OwnerSpendListParams{Owner: "alice", Since: 100})
		return first(err, same("alice's window in the adding transaction", show(rows), []string{"alice/100/h1=12", "alice/100/h2=1", "alice/160/h1=2"}))
	})
	update(t, s, func(tx store.Tx) error { return add(tx, "alice", 160, "h1", 10) })
	view(t, s, func(tx store.Tx) error {
		since, err := tx.OwnerSpendList(store.OwnerSpendListParams{Owner: "alice", Since: 101})
		if err != nil {
			return err
		}
		all, err := tx.OwnerSpendList(store.OwnerSpendListParams{Since: 0})
		if err != nil {
			return err
		}
		none, err := tx.OwnerSpendList(store.OwnerSpendListParams{Owner: "carol"})
		return first(err,
			same("alice's rows from minute 101", show(since), []string{"alice/160/h1=12"}),
			same("every owner's rows", show(all), []string{"/101/h1=4", "alice/100/h1=12", "alice/100/h2=1", "alice/160/h1=12", "bob/99/=3"}),
			check(len(none) == 0, "an owner who spent nothing has rows %v", show(none)))
	})
	for _, bad := range []store.OwnerSpend{
		{Owner: "alice", Minute: 100, Host: "h1", Cost: 0},
		{Owner: "alice", Minute: 100, Host: "h1", Cost: -4},
		{Owner: "a\x00b", Minute: 100, Cost: 1},
		{Owner: "alice", Minute: 100, Host: "h\x00", Cost: 1},
	} {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.OwnerSpendAdd(bad) })
		if err == nil || !(errors.Is(err, store.ErrBadSpend) || errors.Is(err, store.ErrBadID)) {
			t.Errorf("OwnerSpendAdd(%+v) = %v, want ErrBadSpend or ErrBadID", bad, err)
		}
	}
	update(t, s, func(tx store.Tx) error {
		n, err := tx.OwnerSpendPrune(101)
		if err != nil {
			return err
		}
		rows, err := tx.OwnerSpendList(store.OwnerSpendListParams{})
		got := show(rows)
		return first(err, check(n == 3, "pruned %d rows, want 3", n),
			check(slices.Equal(got, []string{"/101/h1=4", "alice/160/h1=12"}), "after pruning minutes before 101: %v", got))
	})
}
