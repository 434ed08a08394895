package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// routeVersions serves a flow name's versions: every user may read
// registered flows (docs/design.md §11), as GET /v1/flows/{name} does.
func (s *Server) routeVersions() {
	s.handle("GET /v1/flows/{name}/versions", s.flowVersions)
	s.handle("GET /v1/flows/{name}/versions/{hash}", s.flowSourceAt)
	s.handle("GET /v1/flows/{name}/versions/{hash}/graph", s.flowGraphAt)
}

func (s *Server) flowVersions(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	vs, err := s.eng.FlowVersions(r.Context(), r.PathValue("name"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := make([]apitypes.FlowVersion, 0, len(vs))
	for _, v := range vs {
		out = append(out, apitypes.FlowVersion{Version: v.Seq, Hash: v.Hash, RegisteredAt: v.RegisteredAt, Owner: v.Owner})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) flowSourceAt(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	fs, err := s.eng.FlowSource(r.Context(), r.PathValue("name"), r.PathValue("hash"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, flowSourceOf(fs))
}

func (s *Server) flowGraphAt(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "format") {
		return
	}
	f, err := s.eng.FlowGraph(r.Context(), r.PathValue("name"), r.PathValue("hash"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeGraph(w, r, f, nil)
}
