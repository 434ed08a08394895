package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

func agentTurn(run, node string, visit, turn int) *store.AgentTurn {
	return &store.AgentTurn{V: store.AgentTurnVersion, RunID: run, Node: node, Visit: visit, Turn: turn, Model: "small",
		RequestDigest: fmt.Sprintf("d%d", turn), RequestBytes: 100 * turn,
		Response:   json.RawMessage(`{"role":"assistant","content":"t` + fmt.Sprint(turn) + `"}`),
		StopReason: "tool_use", Usage: store.AgentUsage{InputTokens: 10, OutputTokens: 5}, UsageReported: true,
		Reserved: 9, Cost: 3, Calls: []store.AgentCall{{ID: "c1", Tool: "notes.put"}}, At: at(time.Duration(turn) * time.Second)}
}

func testAgentTurns(t *testing.T, s store.Store, _ Opener) {
	update(t, s, func(tx store.Tx) error {
		// Turns put out of order come back in turn order; 256 sorts after 3.
		for _, turn := range []int{256, 2, 3, 1} {
			if err := tx.AgentTurnPut(agentTurn("r", "agent", 1, turn)); err != nil {
				return err
			}
		}
		// Other visits, nodes and runs (one whose id shares a prefix) stay apart.
		return first(tx.AgentTurnPut(agentTurn("r", "agent", 2, 1)), tx.AgentTurnPut(agentTurn("r", "agent2", 1, 1)),
			tx.AgentTurnPut(agentTurn("rr", "agent", 1, 1)))
	})
	view(t, s, func(tx store.Tx) error {
		turns, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: "r", Node: "agent", Visit: 1})
		if err != nil {
			return err
		}
		var nums []int
		for _, at := range turns {
			nums = append(nums, at.Turn)
		}
		if fmt.Sprint(nums) != "[1 2 3 256]" {
			return fmt.Errorf("turns in order %v, want [1 2 3 256] (and none of another visit, node or run)", nums)
		}
		if err := same("turn 2", turns[1], agentTurn("r", "agent", 1, 2)); err != nil {
			return err
		}
		// One turn by its number; one not journaled, or of another visit,
		// is not found.
		got, err := tx.AgentTurnGet("r", "agent", 1, 256)
		if err != nil {
			return err
		}
		if err := same("turn 256", got, agentTurn("r", "agent", 1, 256)); err != nil {
			return err
		}
		for _, miss := range [][2]int{{1, 4}, {3, 1}} {
			if _, err := tx.AgentTurnGet("r", "agent", miss[0], miss[1]); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("turn %d of visit %d: %v, want ErrNotFound", miss[1], miss[0], err)
			}
		}
		return nil
	})
	// A turn rewritten with its calls' ends replaces the record, and the
	// transaction reads its own write.
	update(t, s, func(tx store.Tx) error {
		at := agentTurn("r", "agent", 1, 2)
		at.Calls[0].Done, at.Calls[0].Error = true, &store.RunError{Code: "E_X", Message: "failed"}
		if err := tx.AgentTurnPut(at); err != nil {
			return err
		}
		turns, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: "r", Node: "agent", Visit: 1})
		if err != nil {
			return err
		}
		got, err := tx.AgentTurnGet("r", "agent", 1, 2)
		if err != nil {
			return err
		}
		return first(check(len(turns) == 4, "%d turns after a rewrite, want 4", len(turns)), same("rewritten turn", turns[1], at),
			same("rewritten turn read by number", got, at))
	})
	// Bad input is refused and writes nothing.
	err := s.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.AgentTurnPut(agentTurn("r", "agent", 1, 0)); err == nil {
			return errors.New("turn 0 accepted; turns are numbered from 1")
		}
		if err := tx.AgentTurnPut(agentTurn("", "agent", 1, 1)); err == nil {
			return errors.New("a turn without a run accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	view(t, s, func(tx store.Tx) error {
		if err := tx.AgentTurnPut(agentTurn("r", "agent", 1, 9)); !errors.Is(err, store.ErrReadOnly) {
			return fmt.Errorf("AgentTurnPut in View: %v, want ErrReadOnly", err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error { return tx.AgentTurnDeleteRun("r") })
	view(t, s, func(tx store.Tx) error {
		for _, p := range []store.AgentTurnListParams{{RunID: "r", Node: "agent", Visit: 1}, {RunID: "r", Node: "agent", Visit: 2}, {RunID: "r", Node: "agent2", Visit: 1}} {
			turns, err := tx.AgentTurnList(p)
			if err != nil {
				return err
			}
			if len(turns) != 0 {
				return fmt.Errorf("%d turns of %+v left after AgentTurnDeleteRun", len(turns), p)
			}
		}
		turns, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: "rr", Node: "agent", Visit: 1})
		return first(err, check(len(turns) == 1, "run rr has %d turns after deleting run r's, want 1", len(turns)))
	})
}
