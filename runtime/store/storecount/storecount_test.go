package storecount

import (
	"context"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// A get counts one read of one record when it finds it and of none when
// it does not, a list one read of as many records as it returned, in
// Update and View alike; writes count nothing and pass through.
func TestCountsReads(t *testing.T) {
	s := New(memstore.New())
	defer s.Close()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error {
		for n := 1; n <= 3; n++ {
			if err := tx.AgentTurnPut(&store.AgentTurn{V: store.AgentTurnVersion, RunID: "r", Node: "a", Visit: 1, Turn: n}); err != nil {
				return err
			}
		}
		_, err := tx.AgentTurnGet("r", "a", 1, 2)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx store.Tx) error {
		if _, err := tx.AgentTurnGet("r", "a", 1, 4); err == nil {
			t.Error("turn 4 found")
		}
		ts, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: "r", Node: "a", Visit: 1})
		if len(ts) != 3 {
			t.Errorf("%d turns listed, want 3", len(ts))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	reads := s.Reads()
	if got := reads["AgentTurnGet"]; got != (Count{Calls: 2, Records: 1}) {
		t.Errorf("AgentTurnGet %+v, want 2 calls, 1 record", got)
	}
	if got := reads["AgentTurnList"]; got != (Count{Calls: 1, Records: 3}) {
		t.Errorf("AgentTurnList %+v, want 1 call, 3 records", got)
	}
	if got := s.Total(); got != (Count{Calls: 3, Records: 4}) {
		t.Errorf("total %+v, want 3 calls of 4 records", got)
	}
}
