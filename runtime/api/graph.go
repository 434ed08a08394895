package api

import (
	"errors"
	"net/http"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/render"
	"github.com/weirhq/weir/internal/panics"
	"github.com/weirhq/weir/runtime/engine"
)

func (s *Server) routeGraphs() {
	s.handle("GET /v1/flows/{name}/graph", s.flowGraph)
	s.handle("GET /v1/runs/{id}/graph", s.runGraph)
}

func (s *Server) flowGraph(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "format") {
		return
	}
	f, err := s.eng.FlowGraph(r.Context(), r.PathValue("name"), "")
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeGraph(w, r, f, nil)
}

func (s *Server) runGraph(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "format") {
		return
	}
	f, marks, err := s.eng.RunGraph(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeGraph(w, r, f, marks)
}

// writeGraph answers the drawing as text in the format asked (?format=,
// mermaid by default).
func writeGraph(w http.ResponseWriter, r *http.Request, f *flows.Flow, marks map[string]render.Mark) {
	format := r.URL.Query().Get("format")
	if format == "" {
		format = render.FormatMermaid
	}
	out, err := render.Render(f, format, marks)
	var pe *panics.Error
	if errors.As(err, &pe) {
		// The flow's fault (or the renderer's), not the caller's: this
		// flow cannot be drawn; every other request goes on.
		writeErr(w, http.StatusInternalServerError, &engine.Error{Code: engine.CodeFlowUnreadable, Class: engine.ClassRun, Message: pe.Error()})
		return
	}
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: err.Error()})
		return
	}
	if format == render.FormatSVG {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	_, _ = w.Write([]byte(out))
}
