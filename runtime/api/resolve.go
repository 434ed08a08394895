package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// routeResolve registers the route that settles an unknown outcome
// (engine.Ops.Resolve).
func (s *Server) routeResolve() {
	s.handle("POST /v1/runs/{id}/waits/{wait}/resolve", s.resolve)
}

// MaxResolveBody bounds a resolve's body: a result as large as a node's
// result may be, and room for the rest.
const MaxResolveBody = engine.MaxResultBytes + 16<<10

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.ResolveRequest
	if !decode(w, r, MaxResolveBody, &req) {
		return
	}
	if req.Happened == nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: `say whether the call happened: {"happened": true, "result": ...} or {"happened": false}`})
		return
	}
	id := r.PathValue("id")
	hw, err := s.eng.Ops().Resolve(r.Context(), engine.ResolveParams{Owner: ownerFrom(r.Context()), RunID: id, WaitID: r.PathValue("wait"),
		Happened: *req.Happened, Result: req.Result, Reason: req.Reason})
	if err != nil {
		writeResolveErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.ResolveResponse{RunID: id, Node: hw.Node, Wait: hw.ID, Happened: *req.Happened})
}

// writeResolveErr answers a refused resolve: a wait answered before, past
// its deadline or not open is a conflict with the run's state.
func writeResolveErr(w http.ResponseWriter, err error) {
	writeConflictErr(w, err, engine.CodeAlreadyDecided, engine.CodeNotWaiting, engine.CodeWaitExpired)
}
