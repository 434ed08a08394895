package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// A held GET /v1/runs/{id}/wait looks at the run again after
// runWaitPollMin, backing off to runWaitPollMax: a condition that holds
// soon is seen soon, and a long wait on a run with many descendants (a
// decision condition reads each one) does not spin.
const (
	runWaitPollMin = 10 * time.Millisecond
	runWaitPollMax = 200 * time.Millisecond
)

// waitCondition is a parsed until parameter.
type waitCondition struct {
	phase    store.Phase // a phase, or "" for terminal
	decision bool
	wait     string // decision: a wait id or a node; "" for any
}

func parseUntil(s string) (waitCondition, error) {
	switch {
	case s == "" || s == apitypes.UntilTerminal:
		return waitCondition{}, nil
	case s == apitypes.UntilDecision:
		return waitCondition{decision: true}, nil
	case strings.HasPrefix(s, apitypes.UntilDecision+":"):
		w := strings.TrimPrefix(s, apitypes.UntilDecision+":")
		if err := engine.CheckPrintable("the wait of until", w, engine.MaxIDBytes); err != nil || w == "" {
			return waitCondition{}, fmt.Errorf("until %q: decision: must name a wait id or a node", s)
		}
		return waitCondition{decision: true, wait: w}, nil
	case knownPhases[store.Phase(s)]:
		return waitCondition{phase: store.Phase(s)}, nil
	}
	return waitCondition{}, fmt.Errorf("until %q: terminal, a phase (queued, running, waiting, completing, completed, cancelled, failed), decision or decision:WAIT_ID", s)
}

// runWait is GET /v1/runs/{id}/wait?until=COND&timeout=DURATION: it
// answers as soon as COND holds, the run ends without meeting it, or the
// timeout (at most apitypes.MaxRunWait) passes.
func (s *Server) runWait(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "until", "timeout") {
		return
	}
	q := r.URL.Query()
	cond, err := parseUntil(q.Get("until"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: err.Error()})
		return
	}
	hold := apitypes.MaxRunWait
	if t := q.Get("timeout"); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d < 0 {
			writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
				Message: fmt.Sprintf("timeout %q: a duration such as 10s, at most %s", t, apitypes.MaxRunWait)})
			return
		}
		hold = min(d, apitypes.MaxRunWait)
	}
	// This route is meant to stay open: its own bound, not the server's.
	_ = HoldOpen(w, hold+10*time.Second) // beyond the server's write timeout
	ctx, cancel := context.WithTimeout(r.Context(), hold)
	defer cancel()
	owner, id := ownerFrom(r.Context()), r.PathValue("id")
	poll := runWaitPollMin
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		res, err := s.checkWait(r.Context(), owner, id, cond)
		if err != nil {
			writeEngineErr(w, err)
			return
		}
		if res.Met || res.Run.Phase.Terminal() {
			writeJSON(w, http.StatusOK, res)
			return
		}
		select {
		case <-ctx.Done():
			if r.Context().Err() != nil {
				return // the client went away
			}
			writeJSON(w, http.StatusOK, res)
			return
		case <-closing(r.Context()): // the daemon stops: answer as at the timeout
			writeJSON(w, http.StatusOK, res)
			return
		case <-timer.C:
			poll = min(2*poll, runWaitPollMax)
			timer.Reset(poll)
		}
	}
}

// checkWait reads the run once and says whether cond holds.
func (s *Server) checkWait(ctx context.Context, owner, id string, cond waitCondition) (*apitypes.RunWaitResult, error) {
	run, err := s.eng.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	res := &apitypes.RunWaitResult{Run: ViewOf(run, nil)}
	switch {
	case cond.decision:
		ws, err := s.eng.HumanWaits(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		for _, hw := range ws {
			if cond.wait == "" || hw.ID == cond.wait || (!engine.IsWaitID(cond.wait) && hw.Node == cond.wait) {
				res.Decisions = append(res.Decisions, waitOf(hw))
			}
		}
		res.Met = len(res.Decisions) > 0
	case cond.phase != "":
		res.Met = run.Phase == cond.phase
	default:
		res.Met = run.Phase.Terminal()
	}
	return res, nil
}
