package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The soak forks completed runs through every kill, each with a request
// id it sends again as a client retries (every answer to one id names one
// run), and the fork-read and after-fork failpoints kill the daemon between
// a fork's planning and its write, and between its write and its answer.
// Three forks, by their source and fork point:
//   - an echo run from its last node, with a new input: the fork copies
//     the first two nodes' results, so its output is the source's (a node
//     run again would read the new input);
//   - a mail run from "sent", after its at-most-once send: the send is
//     copied, so the fork sends no mail;
//   - a mail run from "send" itself: the fork would send again, so it is
//     refused E_FORK_EFFECTS naming the send until the request says
//     allow_effects, and then the fork sends its own mail once.
// A mail fork's input is its request id, which its mail then carries.

const invForks = "every fork made once per request id, its copied results never run again, at-most-once calls only with leave"

// forkFrom is the node the soak forks soak_echo from.
const forkFrom = "c"

// forkSent is a fork request the client sent: its source, where it forks
// from, whether it needs leave to make at-most-once calls again, and the
// run the answers named, once one did.
type forkSent struct {
	src     *submission
	from    string
	effects bool
	sent    int
	runID   string
}

// input is the fork's input: a new one the fork's output tells apart
// from the source's.
func (f *forkSent) input(id string) json.RawMessage {
	in := map[string]any{"id": id}
	if f.src.kind == kindByFlow("soak_echo") {
		in = map[string]any{"id": f.src.input["id"], "n": num(f.src.input["n"]) + 500}
	}
	b, _ := json.Marshal(in)
	return b
}

// forkOne forks a completed run of the echo or mail kind, or sends a fork
// request sent before again.
func forkOne(ctx context.Context, w *world, c *client.Client) {
	id, f := w.nextFork()
	if f == nil {
		return
	}
	src := f.src
	if v, err := c.RunGet(ctx, src.runID); err != nil || v.Phase != apitypes.PhaseCompleted ||
		src.kind == kindByFlow("soak_mail") && !outputEquals(v, map[string]any{"id": src.input["id"], "sent": true}) {
		return // down, not completed (yet, or cancelled), or a mail run whose send went unknown: a later pass
	}
	req := apitypes.ForkRequest{From: f.from, Input: f.input(id), RequestID: id, Reason: "soak"}
	w.mu.Lock()
	first := f.sent == 0
	f.sent++
	w.mu.Unlock()
	if f.effects && first {
		// Nothing was made under this id yet: without leave the fork
		// must be refused, naming the send.
		_, err := c.Fork(ctx, src.runID, req)
		switch code := client.ErrorCode(err); {
		case code == engine.CodeForkEffects && strings.Contains(err.Error(), "mail.send"):
			w.count("fork refused without leave")
		case code == "" && err != nil:
			return // no answer: the daemon is down
		case err == nil:
			w.violate(invForks, "forking %s (%s) from send without allow_effects was accepted", src.runID, id)
			return
		default:
			if forkRefusal(w, code) {
				return
			}
			w.violate(invForks, "forking %s (%s) from send without allow_effects: %v, want %s naming mail.send", src.runID, id, err, engine.CodeForkEffects)
			return
		}
	}
	req.AllowEffects = f.effects
	res, err := c.Fork(ctx, src.runID, req)
	switch code := client.ErrorCode(err); {
	case err == nil:
	case code == "":
		return // no answer: the daemon is down
	case forkRefusal(w, code):
		return
	default:
		w.violate(invForks, "forking %s (%s) from %s: %v", src.runID, id, f.from, err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case f.runID == "":
		f.runID = res.RunID
		w.counts["forked"]++
	case f.runID != res.RunID:
		w.inline[invForks] = append(w.inline[invForks], fmt.Sprintf("fork request %s answered run %s, then run %s", id, f.runID, res.RunID))
	default:
		w.counts["fork re-sent"]++
	}
}

// mailForkID is the request id a mail fork's input carries.
func mailForkID(v *apitypes.Run) string {
	var in struct{ ID string }
	_ = json.Unmarshal(v.Input, &in)
	return in.ID
}

// forkRefusal counts a refusal admission may give any fork.
func forkRefusal(w *world, code string) bool {
	switch code {
	case engine.CodeDraining, engine.CodeQueueFull, engine.CodeOwnerQuota, engine.CodeStorage:
		w.count("fork refused " + code)
		return true
	}
	return false
}

// nextFork picks a fork request sent before (one in three), or plans a
// new fork of a random echo or mail run: its request id and plan.
func (w *world) nextFork() (string, *forkSent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.forks == nil {
		w.forks = map[string]*forkSent{}
	}
	if len(w.forks) > 0 && w.rng.IntN(3) == 0 {
		for k, v := range w.forks { // a random one: map order
			return k, v
		}
	}
	var srcs []*submission
	for _, s := range w.subs {
		if (s.kind == kindByFlow("soak_echo") || s.kind == kindByFlow("soak_mail")) && s.runID != "" {
			srcs = append(srcs, s)
		}
	}
	if len(srcs) == 0 {
		return "", nil
	}
	f := &forkSent{src: srcs[w.rng.IntN(len(srcs))], from: forkFrom}
	if f.src.kind == kindByFlow("soak_mail") {
		f.from = "sent"
		if w.rng.IntN(2) == 0 {
			f.from, f.effects = "send", true
		}
	}
	id := fmt.Sprintf("fork-%05d", len(w.forks)+1)
	// Kept before it is sent: a request whose answer a kill took is sent
	// again later, as a client retries.
	w.forks[id] = f
	return id, f
}

// checkForks: every run a fork started forks a run the soak asked to fork,
// from the node it asked, and what it copied never ran again: an echo
// fork completed with its source's output, a mail fork from after the
// send sent no mail, one from the send at most one of its own (the mail
// invariant counts it by the fork's request id); and every fork the
// client was answered is in the store.
func checkForks(w *world, f *final) []string {
	var bad []string
	w.mu.Lock()
	defer w.mu.Unlock()
	byID := map[string]bool{}
	for _, v := range f.forked {
		byID[v.ID] = true
		ref := v.ForkedFrom
		plan := planOf(w, &v)
		if ref == nil || plan == nil || ref.RunID != plan.src.runID || ref.Node != plan.from || ref.Visit != 1 ||
			!strings.HasPrefix(v.StartedBy, "fork:"+ref.RunID+":") {
			bad = append(bad, fmt.Sprintf("run %s (started by %q, forked from %+v) is not a fork the soak asked for", v.ID, v.StartedBy, ref))
			continue
		}
		src := plan.src
		switch {
		case src.kind == kindByFlow("soak_echo"):
			// Kills may fail a fork as any run, by design: its task lost
			// its lease more often than a task may.
			if v.Phase.Terminal() && v.Phase != apitypes.PhaseCancelled && !killedTooOften(&v, f.events[v.ID]) &&
				!outputEquals(&v, map[string]any{"id": src.input["id"], "n2": num(src.input["n"]) * 2}) {
				bad = append(bad, fmt.Sprintf("fork %s of %s ended %s with %s, want the source's output (its copied results)", v.ID, ref.RunID, v.Phase, v.Output))
			}
		case v.Phase != apitypes.PhaseCompleted:
		case !outputEquals(&v, map[string]any{"id": mailForkID(&v), "sent": true}) &&
			!(plan.effects && outputEquals(&v, map[string]any{"id": mailForkID(&v), "unknown": true})):
			bad = append(bad, fmt.Sprintf("mail fork %s of %s from %s completed with %s", v.ID, ref.RunID, plan.from, v.Output))
		}
		if !plan.effects && src.kind == kindByFlow("soak_mail") {
			if n := f.records.mailRuns[v.ID]; n > 0 {
				bad = append(bad, fmt.Sprintf("fork %s of %s from after its send sent %d mail(s): a copied send ran again", v.ID, ref.RunID, n))
			}
		}
	}
	for id, fs := range w.forks {
		if fs.runID != "" && !byID[fs.runID] {
			bad = append(bad, fmt.Sprintf("fork %s (request %s) was answered and is not in the store", fs.runID, id))
		}
	}
	return bad
}

// planOf finds the fork request a forked run was made for: the one
// answered with it, else a mail fork's by the request id its input
// carries, an echo fork's by its source (every plan of an echo run is the
// same).
func planOf(w *world, v *apitypes.Run) *forkSent {
	for _, fs := range w.forks {
		if fs.runID == v.ID {
			return fs
		}
	}
	if fs := w.forks[mailForkID(v)]; fs != nil {
		return fs
	}
	if v.ForkedFrom == nil {
		return nil
	}
	for _, fs := range w.forks {
		if fs.src.runID == v.ForkedFrom.RunID && fs.src.kind == kindByFlow("soak_echo") {
			return fs
		}
	}
	return nil
}

func forksSummary(w *world, f *final) string {
	echo, copied, effects := 0, 0, 0
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range f.forked {
		plan := planOf(w, &v)
		switch {
		case v.Phase != apitypes.PhaseCompleted || plan == nil:
		case plan.src.kind == kindByFlow("soak_echo"):
			echo++
		case plan.effects:
			effects++
		default:
			copied++
		}
	}
	return fmt.Sprintf("%d forks made (%d requests sent again, each answered its fork), %d echo forks completed with their source's copied results, %d mail forks from after the send sent none, %d from the send sent their own (each refused first without leave: %d), through fork-read %d and after-fork %d kills",
		w.counts["forked"], w.counts["fork re-sent"], echo, copied, effects, w.counts["fork refused without leave"], f.kills["fork-read"], f.kills["after-fork"])
}
