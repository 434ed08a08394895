package engine

import (
	"container/list"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/weirhq/weir/runtime/internal/transcript"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/sdk/chat"
)

// An agent's step reads its visit's turns each time it runs: after each
// turn, and after each call's end wakes it. Reading every turn each time
// made a visit's reads grow with the square of its turns. A turn that is
// followed by a later one is final — the loop asks the next turn only
// once every call of the last one ended, and only the last turn is ever
// written again — so the engine keeps, per visit, the final turns it
// read (agentMemo) and what they add up to: their messages, their cost
// and tokens, and the runaway guard's counts over them. A step then reads
// only the turns from the first one not final: two records, whatever the
// turn's number. The journal stays the truth: a memo is made from what a
// step read, holds only while the store's first turn past it is the one
// it saw (its request digest and time), and a step without one (the first
// after a restart, another daemon's run, a memo dropped for room) reads
// the visit's turns once, in one listing.

// agentMemoBytes bounds the memory of the memos of all visits (their turn
// records, estimated by size); the least recently used are dropped, and
// their visits read in full again at their next step.
const agentMemoBytes = 64 << 20

// visitKey names one visit of an agent node.
type visitKey struct {
	run, node string
	visit     int
}

// turnMark identifies a journaled turn: its number, the digest of the
// request it answered and when it was asked.
type turnMark struct {
	turn   int
	digest string
	at     int64
}

func markOf(t *store.AgentTurn) turnMark {
	return turnMark{turn: t.Turn, digest: t.RequestDigest, at: t.At.UnixNano()}
}

// visitMemo is what one visit's final turns add up to.
type visitMemo struct {
	key visitKey
	// final are turns 1..k, each followed by a later turn: never written
	// again. next marks turn k+1 as it was read: the memo holds while the
	// store's turn k+1 is that one.
	final []*store.AgentTurn
	next  turnMark
	// msgs are the messages of the final turns; spent and usage what they
	// and their calls cost and used.
	msgs  []chat.Message
	spent int64
	usage store.AgentUsage
	// scan is the runaway guard's counts (runawayScan).
	scan  *runawayScan
	bytes int64
	elem  *list.Element
}

// advance makes final every turn of turns but the last, which it marks.
func (m *visitMemo) advance(turns []*store.AgentTurn) {
	for _, t := range turns[len(m.final):max(len(turns)-1, len(m.final))] {
		m.final = append(m.final, t)
		m.msgs = append(m.msgs, transcript.Turn(t)...)
		m.spent += turnSpent(t)
		m.usage.InputTokens += t.Usage.InputTokens
		m.usage.OutputTokens += t.Usage.OutputTokens
		m.bytes += turnBytes(t)
	}
	if len(turns) > 0 {
		m.next = markOf(turns[len(turns)-1])
	}
}

// turnBytes estimates what a turn record holds in memory.
func turnBytes(t *store.AgentTurn) int64 {
	n := int64(256 + len(t.Response) + len(t.Correction) + len(t.Note))
	for _, c := range t.Calls {
		n += int64(128 + len(c.Result) + len(c.Edited))
		if c.Error != nil {
			n += int64(len(c.Error.Message))
		}
	}
	return 2 * n // the record and the messages made from it
}

// agentMemo holds the memos of visits between their steps. A step takes
// its visit's memo out (no other step shares it) and gives it back when
// it ends.
type agentMemo struct {
	mu      sync.Mutex
	max     int64
	bytes   int64
	entries map[visitKey]*visitMemo
	lru     list.List // front: most recently given back
}

func newAgentMemo(maxBytes int64) *agentMemo {
	return &agentMemo{max: maxBytes, entries: map[visitKey]*visitMemo{}}
}

// take removes and returns the memo of visit k, or nil.
func (am *agentMemo) take(k visitKey) *visitMemo {
	am.mu.Lock()
	defer am.mu.Unlock()
	m := am.entries[k]
	if m != nil {
		delete(am.entries, k)
		am.lru.Remove(m.elem)
		am.bytes -= m.bytes
	}
	return m
}

// give keeps m until its visit's next step, dropping the least recently
// used memos past the bound.
func (am *agentMemo) give(m *visitMemo) {
	if m == nil || m.bytes > am.max {
		return
	}
	am.mu.Lock()
	defer am.mu.Unlock()
	if old := am.entries[m.key]; old != nil {
		am.lru.Remove(old.elem)
		am.bytes -= old.bytes
	}
	am.entries[m.key] = m
	m.elem = am.lru.PushFront(m)
	am.bytes += m.bytes
	for am.bytes > am.max {
		last := am.lru.Back()
		old := last.Value.(*visitMemo)
		am.lru.Remove(last)
		delete(am.entries, old.key)
		am.bytes -= old.bytes
	}
}

// readTurnsTx reads the turns of visit k: with its memo m, only the turns
// from the first not final, one record each until the first not
// journaled; without m, or when the store's first turn past m is not the
// one m saw, all of them in one listing and a new memo. It returns every
// turn (the final ones from the memo) and the memo, which holds them.
func readTurnsTx(tx store.Tx, k visitKey, m *visitMemo) ([]*store.AgentTurn, *visitMemo, error) {
	if m != nil {
		var fresh []*store.AgentTurn
		for n := len(m.final) + 1; ; n++ {
			t, err := tx.AgentTurnGet(k.run, k.node, k.visit, n)
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			fresh = append(fresh, t)
		}
		if len(fresh) > 0 && markOf(fresh[0]) == m.next {
			turns := append(slices.Clip(m.final), fresh...)
			return turns, m, nil
		}
	}
	turns, err := tx.AgentTurnList(store.AgentTurnListParams{RunID: k.run, Node: k.node, Visit: k.visit})
	if err != nil {
		return nil, nil, err
	}
	return turns, &visitMemo{key: k}, nil
}

// checkTurns refuses turns of a record version this weir does not read
// and turns that skip a number, from turn from on (those before were
// checked when they were read).
func checkTurns(node string, turns []*store.AgentTurn, from int) *store.RunError {
	for i := from; i < len(turns); i++ {
		t := turns[i]
		if t.V != store.AgentTurnVersion {
			return &store.RunError{Code: CodeAgentTurns, Message: fmt.Sprintf("agent %s: turn %d has record version %d (this weir reads %d)", node, t.Turn, t.V, store.AgentTurnVersion)}
		}
		if t.Turn != i+1 {
			return &store.RunError{Code: CodeAgentTurns, Message: fmt.Sprintf("agent %s: journaled turns skip from %d to %d", node, i, t.Turn)}
		}
	}
	return nil
}
