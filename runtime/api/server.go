package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Body limits per endpoint: a request cannot carry more than its endpoint
// can use.
const (
	// MaxStartBody bounds a run start: the flow name, request id and input.
	MaxStartBody = 256 << 10
	// MaxRegisterBody bounds a flow registration: the source files.
	MaxRegisterBody = 8 << 20
	// MaxSmallBody bounds every other request body.
	MaxSmallBody = 4 << 10
)

// Version is the API version this server speaks; other versions are refused
// before their body is read.
const Version = "v1"

// Server serves the API over an engine.
type Server struct {
	eng *engine.Engine
	log hclog.Logger
	mux *http.ServeMux
}

// NewServer returns a server for eng.
func NewServer(eng *engine.Engine, log hclog.Logger) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Server{eng: eng, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /v1/runs", s.startRun)
	s.mux.HandleFunc("GET /v1/runs", s.listRuns)
	s.mux.HandleFunc("GET /v1/runs/{id}", s.getRun)
	s.mux.HandleFunc("POST /v1/runs/{id}/cancel", s.cancelRun)
	s.mux.HandleFunc("GET /v1/runs/{id}/events", s.runEvents)
	s.mux.HandleFunc("POST /v1/flows", s.registerFlows)
	s.mux.HandleFunc("GET /v1/flows", s.listFlows)
	s.mux.HandleFunc("GET /v1/deadletters", s.deadLetters)
	s.mux.HandleFunc("GET /v1/stats", s.stats)
	s.mux.HandleFunc("GET /v1/health", s.health)
	s.routeWaits()
	return s
}

// ServeHTTP refuses unknown API versions and ownerless requests before
// reading anything else, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/"+Version+"/") {
		writeErr(w, http.StatusNotFound, &engine.Error{Code: "E_API_VERSION", Class: engine.ClassProtocol,
			Message: fmt.Sprintf("unknown API version in %q: this daemon speaks /%s/", r.URL.Path, Version)})
		return
	}
	if ownerFrom(r.Context()) == "" {
		writeErr(w, http.StatusUnauthorized, &engine.Error{Code: "E_IDENTITY", Class: engine.ClassProtocol,
			Message: "cannot establish the caller's identity"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// StartRequest is the body of POST /v1/runs.
type StartRequest struct {
	Flow      string          `json:"flow"`
	Input     json.RawMessage `json:"input,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if !decode(w, r, MaxStartBody, &req) {
		return
	}
	if req.Flow == "" {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "flow is required"})
		return
	}
	res, err := s.eng.Submit(r.Context(), engine.StartRequest{Owner: ownerFrom(r.Context()), Flow: req.Flow, Input: req.Input, RequestID: req.RequestID})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

// RunView is a run as the API shows it.
type RunView struct {
	ID        string           `json:"id"`
	Flow      string           `json:"flow"`
	Version   string           `json:"version"`
	Owner     string           `json:"owner"`
	RequestID string           `json:"request_id,omitempty"`
	Phase     store.Phase      `json:"phase"`
	Attempt   int              `json:"attempt"`
	Input     json.RawMessage  `json:"input,omitempty"`
	Output    json.RawMessage  `json:"output,omitempty"`
	Error     *store.RunError  `json:"error,omitempty"`
	Progress  *engine.Progress `json:"progress,omitempty"`
	Budget    int64            `json:"budget"`
	Spent     int64            `json:"spent"`
	Parent    string           `json:"parent_run_id,omitempty"`
	CreatedAt string           `json:"created_at"`
	UpdatedAt string           `json:"updated_at"`
}

// ViewOf shows a run (and its progress, if known) as the API does.
func ViewOf(run *store.Run, p *engine.Progress) *RunView {
	v := &RunView{ID: run.ID, Flow: run.Flow, Version: run.Version, Owner: run.Owner, RequestID: run.RequestID,
		Phase: run.Phase, Attempt: run.Attempt, Input: run.Input, Output: run.Output, Error: run.Error, Progress: p,
		Budget: run.Budget, Spent: run.Spent, Parent: run.ParentRunID,
		CreatedAt: run.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), UpdatedAt: run.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	return v
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	owner := ownerFrom(r.Context())
	run, err := s.eng.Get(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	p, _ := s.eng.Progress(r.Context(), run)
	writeJSON(w, http.StatusOK, ViewOf(run, p))
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := intParam(w, q.Get("limit"), 100)
	if !ok {
		return
	}
	runs, err := s.eng.List(r.Context(), ownerFrom(r.Context()), store.RunListParams{Phase: store.Phase(q.Get("phase")), After: q.Get("after"), Limit: limit})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := make([]*RunView, 0, len(runs))
	for _, run := range runs {
		out = append(out, ViewOf(run, nil))
	}
	writeJSON(w, http.StatusOK, out)
}

// CancelResponse answers POST /v1/runs/{id}/cancel.
type CancelResponse struct {
	Answer engine.CancelAnswer `json:"answer"`
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	if !emptyBody(w, r) {
		return
	}
	a, err := s.eng.Cancel(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, CancelResponse{Answer: a})
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := strconv.ParseUint(orDefault(q.Get("after"), "0"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "after must be a sequence number"})
		return
	}
	limit, ok := intParam(w, q.Get("limit"), 1000)
	if !ok {
		return
	}
	evs, err := s.eng.Events(r.Context(), ownerFrom(r.Context()), r.PathValue("id"), after, limit)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	if evs == nil {
		evs = []*store.Event{}
	}
	writeJSON(w, http.StatusOK, evs)
}

// RegisterRequest is the body of POST /v1/flows: files checked and
// registered together.
type RegisterRequest struct {
	Files []engine.SourceFile `json:"files"`
}

func (s *Server) registerFlows(w http.ResponseWriter, r *http.Request) {
	var req RegisterRequest
	if !decode(w, r, MaxRegisterBody, &req) {
		return
	}
	if len(req.Files) == 0 {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "no files"})
		return
	}
	res, err := s.eng.Register(r.Context(), req.Files)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	status := http.StatusOK
	if len(res.Diagnostics) > 0 {
		status = http.StatusUnprocessableEntity
	}
	writeJSON(w, status, res)
}

func (s *Server) listFlows(w http.ResponseWriter, r *http.Request) {
	fl, err := s.eng.Flows(r.Context())
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fl)
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	limit, ok := intParam(w, r.URL.Query().Get("limit"), 100)
	if !ok {
		return
	}
	dl, err := s.eng.DeadLetters(r.Context(), ownerFrom(r.Context()), limit)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	if dl == nil {
		dl = []*store.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, dl)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.eng.Stats())
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := s.eng.Health(r.Context())
	status := http.StatusOK
	if h.Admission == engine.CodeStorage {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

// decode reads a bounded JSON body strictly: unknown fields and trailing
// data are refused.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeErr(w, http.StatusRequestEntityTooLarge, &engine.Error{Code: "E_TOO_LARGE", Class: engine.ClassProtocol,
				Message: fmt.Sprintf("request body is larger than this endpoint's limit of %d bytes", limit)})
			return false
		}
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "reading body: " + err.Error()})
		return false
	}
	if err := DecodeStrict(body, v); err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: err.Error()})
		return false
	}
	return true
}

// DecodeStrict decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed request body: %v", err)
	}
	if dec.More() {
		return errors.New("malformed request body: data after the JSON value")
	}
	return nil
}

// emptyBody refuses a body on endpoints that take none.
func emptyBody(w http.ResponseWriter, r *http.Request) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxSmallBody))
	if err != nil || len(bytes.TrimSpace(b)) > 0 {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "this endpoint takes no body"})
		return false
	}
	return true
}

func intParam(w http.ResponseWriter, s string, def int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "limit must be a non-negative integer"})
		return 0, false
	}
	return n, true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, e *engine.Error) {
	writeJSON(w, status, e)
}

// writeEngineErr maps an engine error to its HTTP status by class and code.
func writeEngineErr(w http.ResponseWriter, err error) {
	var e *engine.Error
	if !errors.As(err, &e) {
		e = &engine.Error{Code: "E_INTERNAL", Class: engine.ClassStorage, Message: err.Error()}
	}
	status := http.StatusBadRequest
	switch {
	case e.Class == engine.ClassStorage:
		status = http.StatusServiceUnavailable
	case e.Code == engine.CodeNotFound || e.Code == engine.CodeUnknownFlow:
		status = http.StatusNotFound
	case e.Code == engine.CodeDedupConflict:
		status = http.StatusConflict
	case e.Code == engine.CodeQueueFull:
		status = http.StatusTooManyRequests
	case e.Code == engine.CodeDraining:
		status = http.StatusServiceUnavailable
	case e.Class == engine.ClassRun:
		status = http.StatusUnprocessableEntity
	}
	writeErr(w, status, e)
}
