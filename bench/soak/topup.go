package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The topup kind's agent says on_budget = "ask" under a budget too small
// for even its first turn: each turn it cannot cover parks the run on a
// budget wait, and the soak's raiser, after the wait has been open a
// while, raises the budget by what the wait says is short, sometimes one
// less (the agent then parks again on the same wait) and sometimes a
// little more, through the kills. The promises: the run's spend never
// passes its budget at any time, nor does any turn reserve past it (the
// budget as given at the start plus the raises journaled before it), and
// every such run completes.

const invTopup = "a budget that asks: spend and reservations never past the budget and its raises, every such run completes"

// topupMark ends the topup kind's prompt, so the model knows the kind.
const topupMark = "[topup]"

// topupBudget is the topup flow's budget: less than a turn's reservation
// at the model's prices (a few units), so the first turn already asks.
const topupBudget = 3

// topupWhile is how long a budget wait stays open before the raiser
// answers it.
const topupWhile = 200 * time.Millisecond

var topupKind = &kind{
	name: "topup", flow: "soak_topup", weight: 1,
	src: fmt.Sprintf(`
flow(
    name = "soak_topup",
    budget = %d,
    nodes = [
        agent("a", model = "small", prompt = lambda ctx: "%s" + ctx.input["id"] + " %s",
              tools = ["testkit.echo"], on_budget = "ask", max_turns = 3, next = "done"),
        task("done", tool = "testkit.echo", args = lambda ctx: {"id": ctx.input["id"], "answer": ctx.results["a"]["answer"]}),
    ],
)
`, topupBudget, agentPrompt, topupMark),
	input: idInput,
	check: completedWith(func(in map[string]any) map[string]any {
		return map[string]any{"id": in["id"], "answer": "topped " + in["id"].(string)}
	}),
}

// respondTopup is the topup kind's model: a first turn asks for an echo,
// a turn that sees its result answers.
func respondTopup(id string, msgs []chatMessage) llmtest.Step {
	for _, m := range msgs {
		if m.Role == "tool" {
			return llmtest.Step{Text: "topped " + id}
		}
	}
	args, _ := json.Marshal(map[string]any{"id": id})
	return llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: args}}}
}

// budgetShown is what a budget wait shows.
type budgetShown struct {
	Budget int64 `json:"budget"`
	Spent  int64 `json:"spent"`
	Needed int64 `json:"needed"`
	Short  int64 `json:"short"`
}

// raiseBudgets looks at every unfinished topup run (its spend must be
// within its budget whenever the soak looks) and raises the budget of
// those parked on a budget wait open for a while.
func raiseBudgets(ctx context.Context, w *world, c *client.Client) {
	for _, phase := range []apitypes.Phase{apitypes.PhaseWaiting, apitypes.PhaseRunning} {
		runs, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Flow: topupKind.flow, Phase: phase}))
		if err != nil {
			return // the daemon is down: a later pass
		}
		for _, r := range runs {
			if ctx.Err() != nil {
				return
			}
			v, err := c.RunGet(ctx, r.ID)
			if err != nil {
				return
			}
			if v.Spent > v.Budget || v.Overspent != 0 {
				w.violate(invTopup, "topup run %s was seen spending %d of a budget of %d (overspent %d)", v.ID, v.Spent, v.Budget, v.Overspent)
			}
			for _, wt := range v.Waits {
				if wt.Kind == apitypes.WaitBudget && time.Since(wt.Since) >= topupWhile && !raiseOne(ctx, w, c, v, wt) {
					return
				}
			}
		}
	}
}

// raiseOne raises the budget a budget wait asks for; false when the
// daemon is down. The raise's request id and amount follow from the wait
// and the budget it shows, so a raise whose answer a kill took is sent
// again as the same request (answered existing, never applied twice).
func raiseOne(ctx context.Context, w *world, c *client.Client, v *apitypes.Run, wt apitypes.HumanWait) bool {
	var sh budgetShown
	if err := json.Unmarshal(wt.Shown, &sh); err != nil || sh.Short <= 0 || sh.Needed <= 0 {
		w.violate(invTopup, "budget wait %s of run %s shows %s", wt.ID, v.ID, wt.Shown)
		return true
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s/%s/%d", w.cfg.Seed, v.ID, wt.ID, sh.Budget))
	// One less than short (when that is still a raise), short, or up to
	// two more.
	add := max(sh.Short+int64(binary.BigEndian.Uint64(sum[:8])%4)-1, 1)
	req := apitypes.BudgetAddRequest{Add: add, Reason: "soak: " + wt.ID, RequestID: "topup-" + hex.EncodeToString(sum[8:20])}
	res, err := c.RunBudgetAdd(ctx, v.ID, req)
	switch code := client.ErrorCode(err); {
	case err == nil && res.Existing:
		w.count("budget raise existing")
	case err == nil:
		w.count("budget raised")
		if add < sh.Short {
			w.count("budget raised short")
		}
	case code == engine.CodeNotWaiting:
		w.count("budget raise refused " + code) // the run ended meanwhile
	case code == engine.CodeDraining || code == "":
		return false
	default:
		w.violate(invTopup, "raising run %s's budget by %d for %s: %v", v.ID, add, wt.ID, err)
	}
	return true
}

// topupTally is what the topup invariant found, for its summary.
type topupTally struct {
	runs, completed, asked, raised int
	added, spent                   int64
}

func checkTopups(w *world, f *final) []string {
	_, bad := tallyTopups(f)
	return bad
}

// tallyTopups walks each topup run's timeline in order: the budget is the
// flow's, raised by each budget_added event; a turn's reservation fits
// what the budget leaves when it is asked, and what the run spent never
// passes its budget. Every topup run completes, unless a cancel or the
// kills (too many leases lost) ended it.
func tallyTopups(f *final) (topupTally, []string) {
	var t topupTally
	var bad []string
	for _, v := range f.runs {
		if v.Flow != topupKind.flow {
			continue
		}
		t.runs++
		budget, spent := int64(topupBudget), int64(0)
		asked := 0
		for _, e := range f.events[v.ID] {
			switch e.Type {
			case "budget_asked":
				asked++
			case "budget_added":
				add, before, after := int64(num(e.Detail["add"])), int64(num(e.Detail["before"])), int64(num(e.Detail["budget"]))
				if before != budget || after != before+add || add <= 0 {
					bad = append(bad, fmt.Sprintf("topup run %s: a raise by %d took its budget from %d to %d, its timeline had it at %d", v.ID, add, before, after, budget))
				}
				budget = before + add
				t.raised++
				t.added += add
			case "agent_turn":
				reserved, cost := int64(num(e.Detail["reserved"])), int64(num(e.Detail["cost"]))
				if spent+reserved > budget {
					bad = append(bad, fmt.Sprintf("topup run %s: turn %v reserved %d with %d spent of a budget of %d", v.ID, e.Detail["turn"], reserved, spent, budget))
				}
				if spent += cost; spent > budget {
					bad = append(bad, fmt.Sprintf("topup run %s: turn %v took its spend to %d, past its budget of %d", v.ID, e.Detail["turn"], spent, budget))
				}
			}
		}
		t.asked += asked
		t.spent += v.Spent
		if v.Budget != budget || v.Spent > v.Budget || v.Overspent != 0 {
			bad = append(bad, fmt.Sprintf("topup run %s ends with %d spent (overspent %d) of a budget of %d; its timeline gives it %d", v.ID, v.Spent, v.Overspent, v.Budget, budget))
		}
		switch v.Phase {
		case apitypes.PhaseCompleted:
			t.completed++
			if asked == 0 {
				bad = append(bad, fmt.Sprintf("topup run %s completed without asking for budget: its budget of %d was not too small", v.ID, topupBudget))
			}
		case apitypes.PhaseCancelled:
		case apitypes.PhaseFailed:
			if !lostTooManyLeases(&v, f.events[v.ID]) {
				bad = append(bad, fmt.Sprintf("topup run %s failed: %s", v.ID, errCode(&v)))
			}
		}
	}
	if t.runs > 0 && t.completed == 0 {
		bad = append(bad, fmt.Sprintf("none of the %d topup runs completed: the kind was not exercised", t.runs))
	}
	return t, bad
}

func topupSummary(w *world, f *final) string {
	t, _ := tallyTopups(f)
	return fmt.Sprintf("%d topup runs, %d completed; %d budget waits asked, %d raises (%d one short, so the agent asked again; %d re-sent and answered existing) added %d units, %d spent: no turn reserved, and no run spent, past its budget and raises at any point of its timeline",
		t.runs, t.completed, t.asked, t.raised, w.counts["budget raised short"], w.counts["budget raise existing"], t.added, t.spent)
}
