package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// waitCondition is a parsed until parameter.
type waitCondition struct {
	phase    store.Phase // a phase, or "" for terminal
	decision bool
	wait     string // decision: a wait id or a node; "" for any
}

// awaits is what a wait for c looks for: a decision may open in a
// descendant, whose changes reach this run's watchers only when its
// record changes; a phase is a change of the run's record; the run's end
// alone is announced across a fleet.
func (c waitCondition) awaits() engine.AwaitFor {
	switch {
	case c.decision:
		return engine.AwaitElsewhere
	case c.phase != "":
		return engine.AwaitRecord
	}
	return engine.AwaitEnd
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
	var res *apitypes.RunWaitResult
	if !s.await(w, r, hold, cond.awaits(), func(ctx context.Context, run *store.Run) (bool, error) {
		var err error
		res, err = s.checkWait(ctx, run, cond)
		return err == nil && (res.Met || run.Phase.Terminal()), err
	}) {
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// await holds the request until met says the wait is over, hold passes or
// the daemon stops (see engine.AwaitRun). It reports whether the caller
// should answer with what met last saw: not after an error (answered
// here) nor once the client went away.
func (s *Server) await(w http.ResponseWriter, r *http.Request, hold time.Duration, what engine.AwaitFor, met func(context.Context, *store.Run) (bool, error)) bool {
	if !s.holdStream(w, r) {
		return false
	}
	// This route is meant to stay open: its own bound, not the server's.
	_ = HoldOpen(w, hold+10*time.Second) // beyond the server's write timeout
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if ch := closing(r.Context()); ch != nil { // the daemon stops: answer as at the timeout
		go func() {
			select {
			case <-ch:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	owner, id := ownerFrom(r.Context()), r.PathValue("id")
	err := s.eng.AwaitRun(ctx, owner, id, hold, what, met)
	if r.Context().Err() != nil {
		return false // the client went away
	}
	if err != nil && ctx.Err() != nil { // the stop cut a read short: read once more
		err = s.eng.AwaitRun(r.Context(), owner, id, 0, what, met)
	}
	if err != nil {
		writeEngineErr(w, err)
		return false
	}
	return true
}

// checkWait says whether cond holds for run.
func (s *Server) checkWait(ctx context.Context, run *store.Run, cond waitCondition) (*apitypes.RunWaitResult, error) {
	res := &apitypes.RunWaitResult{Run: ViewOf(run, nil)}
	switch {
	case cond.decision:
		ws, err := s.eng.HumanWaits(ctx, run.Owner, run.ID)
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

// parseRunWait reads the wait and until parameters of GET /v1/runs/{id}.
func parseRunWait(q url.Values) (time.Duration, store.Phase, error) {
	t := q.Get("wait")
	if t == "" {
		return 0, "", fmt.Errorf("until needs wait=DURATION (at most %s)", apitypes.MaxRunWait)
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 || d > apitypes.MaxRunWait {
		return 0, "", fmt.Errorf("wait %q: a duration such as 10s, at most %s", t, apitypes.MaxRunWait)
	}
	cond, err := parseUntil(q.Get("until"))
	if err == nil && cond.decision {
		err = fmt.Errorf("until %q: a decision is waited for on GET /v1/runs/{id}/wait", q.Get("until"))
	}
	return d, cond.phase, err
}

// getRunWait is GET /v1/runs/{id}?wait=DURATION[&until=PHASE]: the run,
// as GET /v1/runs/{id} shows it, once it is terminal (or in PHASE) or
// DURATION passed.
func (s *Server) getRunWait(w http.ResponseWriter, r *http.Request) {
	hold, phase, err := parseRunWait(r.URL.Query())
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: err.Error()})
		return
	}
	var last *store.Run
	if !s.await(w, r, hold, waitCondition{phase: phase}.awaits(), func(_ context.Context, run *store.Run) (bool, error) {
		last = run
		return run.Phase.Terminal() || run.Phase == phase, nil
	}) {
		return
	}
	writeJSON(w, http.StatusOK, s.viewOfRun(r.Context(), last))
}
