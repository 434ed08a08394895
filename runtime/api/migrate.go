package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// routeMigrate registers the route that moves a parked run to the latest
// version of its flow (engine.Ops.Migrate).
func (s *Server) routeMigrate() {
	s.handle("POST /v1/runs/{id}/migrate", s.migrate)
}

// maxMigrateBody bounds a migration's body: a version word and a reason.
const maxMigrateBody = engine.MaxMigrateReasonBytes + 4<<10

func (s *Server) migrate(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.MigrateRequest
	if !decode(w, r, maxMigrateBody, &req) {
		return
	}
	res, err := s.eng.Ops().Migrate(r.Context(), engine.MigrateParams{Owner: ownerFrom(r.Context()), RunID: r.PathValue("id"), To: req.To, Reason: req.Reason})
	if err != nil {
		// A run that does not fit, or is not parked, is a conflict with
		// its state.
		writeConflictErr(w, err, engine.CodeIncompatible, engine.CodeNotWaiting)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.MigrateResponse{RunID: res.RunID, Flow: res.Flow, From: res.From, To: res.To, Migrated: res.Migrated})
}
