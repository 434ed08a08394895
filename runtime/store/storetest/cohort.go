package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

func testCohorts(t *testing.T, s store.Store, _ Opener) {
	c := &store.Cohort{RunID: "r", Node: "fan", Visit: 1, Items: 3, Need: 2, State: store.CohortOpen, Deadline: at(time.Minute), CreatedAt: t0,
		ChildBudget: 33, Unknown: []int{2}}
	other := &store.Cohort{RunID: "r", Node: "fan", Visit: 2, Items: 1, Need: 1, State: store.CohortOpen, CreatedAt: t0}
	update(t, s, func(tx store.Tx) error {
		if err := first(tx.CohortPut(c), tx.CohortPut(other)); err != nil {
			return err
		}
		// Items put out of order come back in index order; 256 sorts after 3.
		for _, i := range []int{256, 2, 0, 1} {
			it := &store.CohortItem{RunID: "r", Node: "fan", Visit: 1, Index: i, Value: json.RawMessage(fmt.Sprint(i)), State: store.ItemPending}
			if err := tx.CohortItemPut(it); err != nil {
				return err
			}
		}
		return tx.CohortItemPut(&store.CohortItem{RunID: "r", Node: "fan", Visit: 2, Index: 0, Value: json.RawMessage(`"x"`), State: store.ItemPending})
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.CohortGet("r", "fan", 1)
		_, err2 := tx.CohortGet("r", "fan", 3)
		if err := first(err, same("cohort", got, c), isNotFound("missing visit", err2)); err != nil {
			return err
		}
		items, err := tx.CohortItemList("r", "fan", 1)
		if err != nil {
			return err
		}
		var idx []int
		for _, it := range items {
			idx = append(idx, it.Index)
		}
		if fmt.Sprint(idx) != "[0 1 2 256]" {
			return fmt.Errorf("items in order %v, want [0 1 2 256] (and none of visit 2)", idx)
		}
		_, err = tx.CohortItemGet("r", "fan", 1, 7)
		return isNotFound("missing item", err)
	})
	// Read-modify-write of an item inside Update sees its own write.
	update(t, s, func(tx store.Tx) error {
		it, err := tx.CohortItemGet("r", "fan", 1, 1)
		if err != nil {
			return err
		}
		it.State, it.Result, it.Deadline = store.ItemPublished, json.RawMessage(`{"ok":1}`), at(time.Hour)
		if err := tx.CohortItemPut(it); err != nil {
			return err
		}
		again, err := tx.CohortItemGet("r", "fan", 1, 1)
		if err != nil {
			return err
		}
		return same("item read back in the same transaction", again, it)
	})
	update(t, s, func(tx store.Tx) error {
		err := tx.CohortItemPut(&store.CohortItem{RunID: "r", Node: "fan", Visit: 1, Index: -1})
		if err == nil {
			return fmt.Errorf("a negative index was accepted")
		}
		return nil
	})
}
