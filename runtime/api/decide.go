package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

func (s *Server) routeWaits() {
	s.handle("POST /v1/runs/{id}/waits/{node}/approve", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) })
	s.handle("POST /v1/runs/{id}/waits/{node}/reject", func(w http.ResponseWriter, r *http.Request) { s.decide(w, r, false) })
	s.handle("GET /v1/runs/{id}/waits", s.listWaits)
	s.handle("GET /v1/runs/{id}/wait", s.runWait)
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.DecideRequest
	if !decode(w, r, MaxStartBody, &req) {
		return
	}
	id, node := r.PathValue("id"), r.PathValue("node")
	dw, err := s.eng.DecideWait(r.Context(), engine.DecideParams{Owner: ownerFrom(r.Context()), RunID: id, Node: node, Approve: approve,
		Payload: req.Payload, Respond: len(req.Result) > 0, Result: req.Result, Reason: req.Reason, Digest: req.Digest})
	if err != nil {
		writeDecideErr(w, err)
		return
	}
	hw, d := dw.Wait, dw.Decision
	writeJSON(w, http.StatusOK, apitypes.DecideResponse{RunID: id, Node: hw.Node, Wait: hw.ID, Kind: hw.Kind, Decision: d})
}

func writeDecideErr(w http.ResponseWriter, err error) {
	writeConflictErr(w, err, engine.CodeAlreadyDecided, engine.CodeNotWaiting, engine.CodeAmbiguousWait, engine.CodeStaleDecision, engine.CodeApprovalExpired)
}

func (s *Server) listWaits(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	ws, err := s.eng.HumanWaits(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := convertAll(ws, waitOf)
	if out == nil {
		out = []apitypes.HumanWait{}
	}
	writeJSON(w, http.StatusOK, out)
}
