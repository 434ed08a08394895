package main

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// Waste is what kills cost the agents: nothing is journaled before a
// model turn answers, so a turn a kill cut off is asked again, and the
// turn journaled next reports those asks (cut) at its reservation each
// (cut_reserved), as the upper bound of what they cost. The agent
// invariant holds the other side (each turn reports at least the asks of
// it the model server saw again); this one holds the bound itself: a turn
// reports no more asks cut off than kills of its daemon happened between
// its previous turn and it, so the waste stays within one reservation per
// kill, and the agent usage the API reports adds up to the turns' reports.
// It measures the waste too, in the model server's tokens: what it billed
// for the asks of a turn beyond the one journaled stays within the turn's
// report at the reservation's tokens, and what it billed in all beyond
// every journaled turn is the figure of the summary.

const invWaste = "agent waste within one reservation per kill of the daemon that held the turn"

// killAt is one kill of a slot's daemon, as the soak saw it end: after
// its death, before its slot's next daemon started.
type killAt struct {
	slot int
	at   time.Time
}

// killed records a kill of slot's daemon.
func (w *world) killed(slot int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kills = append(w.kills, killAt{slot: slot, at: time.Now()})
}

// wasteTally is what the waste invariant found, for its summary.
type wasteTally struct {
	turns, cutTurns, cut int
	cutReserved          int64
	// worst is the most one turn reported cut off, and worstPerKill the
	// most reserved per kill in one turn's report.
	worst        int
	worstPerKill int64
	// billedAgain is what the model server billed, in tokens, for the
	// asks of journaled turns beyond the journaled one; journaled the
	// tokens the turns' records hold.
	billedAgain, journaled int64
}

func checkWaste(w *world, f *final) []string {
	_, bad := tallyWaste(w, f)
	return bad
}

func tallyWaste(w *world, f *final) (wasteTally, []string) {
	var t wasteTally
	var bad []string
	w.mu.Lock()
	kills := append([]killAt(nil), w.kills...)
	w.mu.Unlock()
	asks := asksOf(f)
	for _, v := range f.runs {
		if !isAgentFlow(v.Flow) {
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, v.CreatedAt)
		if err != nil {
			bad = append(bad, fmt.Sprintf("agent run %s was created at %q", v.ID, v.CreatedAt))
			continue
		}
		evs := f.events[v.ID]
		prev := map[string]time.Time{}
		cut, cutReserved := map[string]int{}, map[string]int64{}
		for _, e := range evs {
			if e.Type != "agent_turn" {
				continue
			}
			t.turns++
			n, reserved, cr := int(num(e.Detail["cut"])), int64(num(e.Detail["reserved"])), int64(num(e.Detail["cut_reserved"]))
			since, ok := prev[e.Node]
			if !ok {
				since = created.Add(-time.Millisecond) // created_at is rounded to milliseconds
			}
			prev[e.Node] = e.At
			cut[e.Node] += n
			cutReserved[e.Node] += cr
			if n == 0 && cr == 0 {
				continue
			}
			t.cutTurns++
			t.cut += n
			t.cutReserved += cr
			t.worst = max(t.worst, n)
			allowed := lostLeases(f, v, evs, kills, since, e.At)
			if cr != int64(n)*reserved {
				bad = append(bad, fmt.Sprintf("run %s: turn %v of %s reports %d asks cut off at %d reserved, not %d at its reservation of %d each",
					v.ID, e.Detail["turn"], e.Node, n, cr, n, reserved))
			}
			if n > allowed {
				bad = append(bad, fmt.Sprintf("run %s: turn %v of %s reports %d asks cut off (%d reserved), and its daemons lost its lease %d times since its previous turn (%s to %s)",
					v.ID, e.Detail["turn"], e.Node, n, cr, allowed, since.Format(time.RFC3339Nano), e.At.Format(time.RFC3339Nano)))
			}
			if n > 0 {
				t.worstPerKill = max(t.worstPerKill, cr/int64(n))
			}
		}
		bad = append(bad, billedPastReports(f, v, asks, &t)...)
		if v.Progress == nil {
			continue
		}
		for _, a := range v.Progress.Agents {
			if a.CutTurns != cut[a.Node] || a.CutReserved != cutReserved[a.Node] {
				bad = append(bad, fmt.Sprintf("run %s: the API reports agent %s's waste as %d asks, %d reserved; its turns report %d, %d",
					v.ID, a.Node, a.CutTurns, a.CutReserved, cut[a.Node], cutReserved[a.Node]))
			}
		}
	}
	return t, bad
}

// reservedTokens is the most tokens a reservation of units pays for at
// the soak model's price (a reservation is the turn's worst case in
// tokens, priced and rounded up).
func reservedTokens(units int64) int64 { return units * 1_000_000 / agentTokenPrice }

// turnAsks are the asks of one turn the model server read: how many, and
// the input tokens it billed for them.
type turnAsks struct {
	n     int
	input int64
}

func asksOf(f *final) map[agentTurnKey]turnAsks {
	asks := map[agentTurnKey]turnAsks{}
	for _, r := range f.modelRequests {
		if k, ok := requestTurn(r.Body); ok {
			a := asks[k]
			a.n++
			a.input += (int64(len(r.Body)) + 3) / 4
			asks[k] = a
		}
	}
	return asks
}

// billedPastReports holds what the model server billed for each journaled
// turn of run v against what the turn's record holds: the asks beyond the
// journaled one (their input the server's quarter of each request's
// bytes, their output the journaled answer's, the model being
// deterministic) cost no more tokens than the turn reports cut off.
func billedPastReports(f *final, v apitypes.Run, asks map[agentTurnKey]turnAsks, t *wasteTally) []string {
	reqID, ok := inputID(v)
	if !ok {
		return nil
	}
	var bad []string
	for _, e := range f.events[v.ID] {
		if e.Type != "agent_turn" {
			continue
		}
		k := agentTurnKey{reqID: reqID, turn: int(num(e.Detail["turn"]))}
		in, out := int64(num(e.Detail["input_tokens"])), int64(num(e.Detail["output_tokens"]))
		t.journaled += in + out
		billed := asks[k].input + int64(asks[k].n)*out
		again := max(billed-in-out, 0)
		t.billedAgain += again
		if bound := reservedTokens(int64(num(e.Detail["cut_reserved"]))); again > bound {
			bad = append(bad, fmt.Sprintf("run %s: the model server billed %d tokens for turn %d's asks beyond the journaled one, past the %d of the reservations it reports cut off",
				v.ID, again, k.turn, bound))
		}
	}
	return bad
}

// lostLeases counts the times run v's daemons may have lost its lease in
// (since, until]: a lone daemon's kills then. A fleet's short leases may
// also expire on a live daemon a loaded machine kept from renewing (a
// turn it was asking is then asked again as well): there, each lease the
// run lost, an expired event of its timeline.
func lostLeases(f *final, v apitypes.Run, evs []apitypes.Event, kills []killAt, since, until time.Time) int {
	n := 0
	if len(f.records.hostOf) > 0 {
		for _, e := range evs {
			if e.Type == "expired" && e.At.After(since) && !e.At.After(until) {
				n++
			}
		}
		return n
	}
	for _, k := range kills {
		if k.at.After(since) && !k.at.After(until) {
			n++
		}
	}
	return n
}

func wasteSummary(w *world, f *final) string {
	t, _ := tallyWaste(w, f)
	w.mu.Lock()
	kills := len(w.kills)
	w.mu.Unlock()
	a, _ := tallyAgentTurns(w, f)
	billed := f.modelBilled.InputTokens + f.modelBilled.OutputTokens
	return fmt.Sprintf("%d kills; of %d agent turns journaled, %d report %d asks cut off (at most %d in one turn), %d units reserved for them in all (at most %d per kill in one turn, at most %d tokens in all), each within the kills of its daemon since its previous turn; the model server saw %d asks again and billed %d tokens for them, %d tokens in all beyond the %d the turns journaled (asks of turns a cancel or a failure ended unjournaled included); the API's agent usage adds up to the turns'",
		kills, t.turns, t.cutTurns, t.cut, t.worst, t.cutReserved, t.worstPerKill, reservedTokens(t.cutReserved), a.again, t.billedAgain, billed-t.journaled, t.journaled)
}
