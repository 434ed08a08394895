package api

import (
	"net/http"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// routeDeadLetters registers the dead-letter routes: list, show and
// redrive (engine.Ops).
func (s *Server) routeDeadLetters() {
	s.handle("GET /v1/deadletters", s.deadLetters)
	s.handle("GET /v1/deadletters/{task}", s.deadLetter)
	s.handle("POST /v1/deadletters/redrive", s.redrive)
}

// MaxRedriveBody bounds a redrive's body: MaxRedriveBatch task ids of
// MaxIDBytes, and room for the rest.
const MaxRedriveBody = engine.MaxRedriveBatch*(engine.MaxIDBytes+8) + 16<<10

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "limit", "flow", "tool", "since") {
		return
	}
	q := r.URL.Query()
	limit, ok := limitParam(w, q.Get("limit"), 100, MaxListLimit)
	if !ok {
		return
	}
	for _, f := range []string{"flow", "tool"} {
		if err := engine.CheckPrintable(f, q.Get(f), engine.MaxIDBytes); err != nil {
			writeEngineErr(w, err)
			return
		}
	}
	since, err := sinceParam(q.Get("since"), s.eng.Ops().Now())
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	dl, err := s.eng.Ops().DeadLetterList(r.Context(), engine.DeadLetterParams{Owner: ownerFrom(r.Context()),
		Flow: q.Get("flow"), Tool: q.Get("tool"), Since: since, Limit: limit})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := convertAll(dl, deadLetterOf)
	if out == nil {
		out = []*apitypes.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, out)
}

// sinceParam reads a since: an RFC 3339 time, or a Go duration back from
// now ("1h": the last hour); "" is no bound.
func sinceParam(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return time.Time{}, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
		Message: "since " + `"` + s + `"` + " is neither an RFC 3339 time nor a positive duration such as 1h"}
}

func (s *Server) deadLetter(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	id := r.PathValue("task")
	if err := engine.CheckPrintable("task id", id, engine.MaxIDBytes); err != nil {
		writeEngineErr(w, err)
		return
	}
	dl, run, err := s.eng.Ops().DeadLetter(r.Context(), ownerFrom(r.Context()), id)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := apitypes.DeadLetterDetail{DeadLetter: *deadLetterOf(dl)}
	if run != nil {
		out.Run = s.viewOfRun(r.Context(), run)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.RedriveRequest
	if !decode(w, r, MaxRedriveBody, &req) {
		return
	}
	since, err := sinceParam(req.Since, s.eng.Ops().Now())
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	owner := ownerFrom(r.Context())
	ans, err := s.eng.Ops().Redrive(r.Context(), engine.RedriveParams{Owner: owner, TaskIDs: req.TaskIDs, Flow: req.Flow, Tool: req.Tool,
		All: req.All, Since: since, By: owner, Reason: req.Reason, RequestID: req.RequestID})
	if err != nil && ans == nil {
		writeEngineErr(w, err)
		return
	}
	out := apitypes.RedriveResponse{Results: []apitypes.RedriveResult{}, More: ans.More}
	for _, res := range ans.Results {
		rr := apitypes.RedriveResult{TaskID: res.TaskID, RunID: res.RunID, Node: res.Node, Wait: res.Wait, Redriven: res.Redriven}
		if res.Err != nil {
			rr.Error = &apitypes.ErrorBody{Code: res.Err.Code, Message: res.Err.Message}
		}
		out.Results = append(out.Results, rr)
	}
	writeJSON(w, http.StatusOK, out)
}
