package api

import (
	"net/http"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// routeForks registers the fork of a run, the listing of its family and
// its journal for a recording (what a replay, like a fork, starts from).
func (s *Server) routeForks() {
	s.handle("POST /v1/runs/{id}/fork", s.forkRun)
	s.handle("GET /v1/runs/{id}/lineage", s.runLineage)
	s.handle("GET /v1/runs/{id}/journal", s.journal)
}

// forkRun is POST /v1/runs/{id}/fork: 201 with the new run (Location
// names it), 200 when the request id made it before.
func (s *Server) forkRun(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.ForkRequest
	if !decodeStart(w, r, &req) {
		return
	}
	owner := ownerFrom(r.Context())
	res, err := s.eng.Ops().Fork(r.Context(), engine.ForkParams{Owner: owner, RunID: r.PathValue("id"), From: req.From, Input: req.Input,
		Version: req.Version, AllowEffects: req.AllowEffects, RequestID: req.RequestID, By: owner, Reason: req.Reason})
	if err != nil {
		writeForkErr(w, err)
		return
	}
	writeStarted(w, res.RunID, res.Existing, forkResultOf(res))
}

// writeForkErr answers a refused fork: E_FORK_EFFECTS is a conflict
// with what the caller allowed (409), the rest as every engine error.
func writeForkErr(w http.ResponseWriter, err error) {
	writeConflictErr(w, err, engine.CodeForkEffects)
}

// runLineage is GET /v1/runs/{id}/lineage: the run's family of forks,
// the root source first.
func (s *Server) runLineage(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	runs, err := s.eng.Ops().Lineage(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, convertAll(runs, func(run *store.Run) *apitypes.Run { return ViewOf(run, nil) }))
}

func forkRefOf(f *store.ForkRef) *apitypes.ForkRef {
	if f == nil {
		return nil
	}
	return &apitypes.ForkRef{RunID: f.RunID, Node: f.Node, Visit: f.Visit}
}

func forkResultOf(res *engine.ForkResult) *apitypes.ForkResult {
	out := &apitypes.ForkResult{RunID: res.RunID, Existing: res.Existing, ForkedFrom: *forkRefOf(&res.From), Version: res.Version,
		Copied: res.Copied, NotCopied: res.NotCopied, Reruns: res.Reruns, Effects: convertAll(res.Effects, effectSiteOf)}
	if out.Copied == nil {
		out.Copied = []string{}
	}
	if out.Reruns == nil {
		out.Reruns = []string{}
	}
	if out.Effects == nil {
		out.Effects = []apitypes.EffectSite{}
	}
	return out
}

func effectSiteOf(s flows.EffectSite) apitypes.EffectSite {
	return apitypes.EffectSite{Flow: s.Flow, Node: s.Node, Kind: string(s.Kind), Tool: s.Tool, Pos: s.Pos.String(), Via: s.Via, Why: s.Why}
}
