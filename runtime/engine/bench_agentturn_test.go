package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

// BenchmarkAgentCallEnd reads one turn's record of a visit of 100
// journaled turns on Badger — by listing the visit (how a call's end read
// it before store.AgentTurnGet) and by its key — and reads and rewrites it
// as a call's end does (a commit): by key, turn 1 and turn 100 cost the
// same; by listing, what a read costs grows with the visit, so a visit's
// call ends grew with the square of its turns.
//
//	go test -run '^$' -bench AgentCallEnd ./runtime/engine/
func BenchmarkAgentCallEnd(b *testing.B) {
	st, err := badgerstore.Open(b.TempDir(), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const turns = 100
	if err := st.Update(ctx, func(tx store.Tx) error {
		for n := 1; n <= turns; n++ {
			t := &store.AgentTurn{V: store.AgentTurnVersion, RunID: "r", Node: "a", Visit: 1, Turn: n, Model: "small",
				RequestDigest: fmt.Sprint("d", n), Response: json.RawMessage(`{"role":"assistant","content":"` + fmt.Sprint(n) + `"}`),
				Calls: []store.AgentCall{{ID: "c1", Tool: "kv.get"}}, At: time.Unix(int64(n), 0)}
			if err := tx.AgentTurnPut(t); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, turns} {
		// The read a call's end made before AgentTurnGet, beside it.
		b.Run(fmt.Sprintf("listing/turn=%d", n), func(b *testing.B) {
			for b.Loop() {
				if err := st.View(ctx, func(tx store.Tx) error {
					ts, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: "r", Node: "a", Visit: 1})
					if err == nil && ts[n-1].Turn != n {
						err = fmt.Errorf("turn %d at %d", ts[n-1].Turn, n)
					}
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("get/turn=%d", n), func(b *testing.B) {
			for b.Loop() {
				if err := st.View(ctx, func(tx store.Tx) error {
					_, err := agentTurnTx(tx, "r", "a", 1, n)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("end/turn=%d", n), func(b *testing.B) {
			for b.Loop() {
				if err := st.Update(ctx, func(tx store.Tx) error {
					t, err := agentTurnTx(tx, "r", "a", 1, n)
					if err != nil {
						return err
					}
					t.Calls[0].Done = true
					_, err = putTurnTx(tx, t)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
