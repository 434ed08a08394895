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

// The soak forks completed runs of the echo kind from their last node,
// through every kill, with a new input: the fork copies the first two
// nodes' results, so its output is the source's (a node run again would
// read the new input), and the fork-read and after-fork failpoints kill
// the daemon between a fork's planning and its write, and between its
// write and its answer. A fork request's id is sent again, as a client
// retries: every answer to one id names one run.

const invForks = "every fork made once per request id, its copied results never run again"

// forkFrom is the node the soak forks soak_echo from.
const forkFrom = "c"

// forkSent is a fork request the client sent: its source and the run the
// answers named, once one did.
type forkSent struct {
	src   *submission
	runID string
}

// forkOne forks a completed run of the echo kind, or sends a fork
// request sent before again.
func forkOne(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	if w.forks == nil {
		w.forks = map[string]*forkSent{}
	}
	var id string
	var f *forkSent
	if len(w.forks) > 0 && w.rng.IntN(3) == 0 {
		for k, v := range w.forks { // a random one: map order
			id, f = k, v
			break
		}
	} else {
		var echoes []*submission
		for _, s := range w.subs {
			if s.kind == kindByFlow("soak_echo") && s.runID != "" {
				echoes = append(echoes, s)
			}
		}
		if len(echoes) == 0 {
			w.mu.Unlock()
			return
		}
		f = &forkSent{src: echoes[w.rng.IntN(len(echoes))]}
		id = fmt.Sprintf("fork-%05d", len(w.forks)+1)
		// Kept before it is sent: a request whose answer a kill took is
		// sent again later, as a client retries.
		w.forks[id] = f
	}
	src := f.src
	w.mu.Unlock()
	if v, err := c.RunGet(ctx, src.runID); err != nil || v.Phase != apitypes.PhaseCompleted {
		return // down, or not completed (yet, or cancelled): a later pass
	}
	in, _ := json.Marshal(map[string]any{"id": src.input["id"], "n": num(src.input["n"]) + 500})
	res, err := c.Fork(ctx, src.runID, apitypes.ForkRequest{From: forkFrom, Input: in, RequestID: id, Reason: "soak"})
	switch code := client.ErrorCode(err); {
	case err == nil:
	case code == "":
		return // no answer: the daemon is down
	case code == engine.CodeDraining || code == engine.CodeQueueFull || code == engine.CodeOwnerQuota || code == engine.CodeStorage:
		w.count("fork refused " + code)
		return
	default:
		w.violate(invForks, "forking %s (%s) from %s: %v", src.runID, id, forkFrom, err)
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

// checkForks: every run a fork started forks a run of the echo kind from
// c@1, and completed with the source's output; every fork the client was
// answered is in the store.
func checkForks(w *world, f *final) []string {
	var bad []string
	srcs := map[string]*submission{}
	for _, s := range w.subs {
		if s.runID != "" {
			srcs[s.runID] = s
		}
	}
	byID := map[string]bool{}
	for _, v := range f.forked {
		byID[v.ID] = true
		ref := v.ForkedFrom
		if ref == nil || ref.Node != forkFrom || ref.Visit != 1 || srcs[ref.RunID] == nil || srcs[ref.RunID].kind != kindByFlow("soak_echo") ||
			!strings.HasPrefix(v.StartedBy, "fork:"+ref.RunID+":") {
			bad = append(bad, fmt.Sprintf("run %s (started by %q, forked from %+v) is not a fork of an echo run from %s", v.ID, v.StartedBy, ref, forkFrom))
			continue
		}
		src := srcs[ref.RunID]
		if v.Phase.Terminal() && v.Phase != apitypes.PhaseCancelled &&
			!outputEquals(&v, map[string]any{"id": src.input["id"], "n2": num(src.input["n"]) * 2}) {
			bad = append(bad, fmt.Sprintf("fork %s of %s ended %s with %s, want the source's output (its copied results)", v.ID, ref.RunID, v.Phase, v.Output))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, fs := range w.forks {
		if fs.runID != "" && !byID[fs.runID] {
			bad = append(bad, fmt.Sprintf("fork %s (request %s) was answered and is not in the store", fs.runID, id))
		}
	}
	return bad
}

func forksSummary(w *world, f *final) string {
	completed := 0
	for _, v := range f.forked {
		if v.Phase == apitypes.PhaseCompleted {
			completed++
		}
	}
	return fmt.Sprintf("%d forks made (%d requests sent again, each answered its fork), %d completed with their source's copied results, through fork-read %d and after-fork %d kills",
		w.counts["forked"], w.counts["fork re-sent"], completed, f.kills["fork-read"], f.kills["after-fork"])
}
