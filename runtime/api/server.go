package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/requestid"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
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

// QueueFullRetryAfter is the Retry-After of a 429 E_QUEUE_FULL: the
// queue drains as slots free, so a client that waits this long before it
// sends the start again usually finds room, and one that keeps being
// refused should back off further.
const QueueFullRetryAfter = 2 * time.Second

// Version is the API version this server speaks; other versions are refused
// before their body is read.
const Version = apitypes.Version

// Server serves the API over an engine.
type Server struct {
	eng      *engine.Engine
	log      hclog.Logger
	mux      *http.ServeMux
	tokens   atomic.Pointer[Tokens]
	daemon   Daemon
	adminUID int
	caps     *ownerCaps // each owner's share of requests and streams
	// routes are the patterns registered on mux, in order: the route
	// table docs/openapi.yaml is checked against.
	routes []string
	// hooks serves /v1/hooks/{name} (WithHooks; nil: no hook is
	// configured), on hookMux.
	hooks   http.Handler
	hookMux *http.ServeMux
}

// Option configures a Server.
type Option func(*Server)

// WithHooks serves webhooks' deliveries at /v1/hooks/{name} with h (a
// hooks.Handler), before and without the caller's identity.
func WithHooks(h http.Handler) Option {
	return func(s *Server) { s.hooks = h }
}

// WithTokens sets the bearer tokens accepted on TCP connections.
func WithTokens(t *Tokens) Option { return func(s *Server) { s.tokens.Store(t) } }

// WithDaemon connects the admin endpoints and the status view to the
// process hosting the server.
func WithDaemon(d Daemon) Option { return func(s *Server) { s.daemon = d } }

// WithAdminUID sets the one OS user whose Unix socket requests may use the
// admin endpoints (default: the user running the server).
func WithAdminUID(uid int) Option { return func(s *Server) { s.adminUID = uid } }

// WithHTTPLimits sets the per-owner shares of requests and streams
// (l's MaxRequestsPerOwner and MaxStreamsPerOwner; default: theirs).
func WithHTTPLimits(l HTTPLimits) Option { return func(s *Server) { s.caps = newOwnerCaps(l) } }

// NewServer returns a server for eng.
func NewServer(eng *engine.Engine, log hclog.Logger, opts ...Option) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Server{eng: eng, log: log, mux: http.NewServeMux(), adminUID: os.Getuid(), caps: newOwnerCaps(HTTPLimits{})}
	for _, o := range opts {
		o(s)
	}
	s.handle("POST /v1/runs", s.startRun)
	s.handle("GET /v1/runs", s.listRuns)
	s.handle("GET /v1/runs/{id}", s.getRun)
	s.handle("POST /v1/runs/{id}/cancel", s.cancelRun)
	s.handle("GET /v1/runs/{id}/events", s.runEvents)
	s.handle("POST /v1/flows", s.registerFlows)
	s.handle("GET /v1/flows", s.listFlows)
	s.handle("POST /v1/flows/check", s.checkFlows)
	s.handle("GET /v1/stats", s.stats)
	s.handle("GET /v1/stats/history", s.statsHistory)
	s.handle("GET /v1/stats/owners", s.statsOwners)
	s.handle("GET /v1/health", s.health)
	s.handle("POST /v1/admin/reload", s.adminReload)
	s.handle("GET /v1/admin/audit", s.adminAudit)
	s.handle("POST /v1/admin/plugins/rescan", s.adminRescan)
	s.handle("GET /v1/openapi.json", s.openAPI)
	s.routeWaits()
	s.routeDeadLetters()
	s.routeResolve()
	s.routeMigrate()
	s.routeBudget()
	s.routeGraphs()
	s.routeVersions()
	s.routeStreams()
	s.routeForks()
	s.routeSchedules()
	s.routeEvents()
	// Outside identity: a delivery proves itself by its signature
	// (runtime/internal/hooks), and its events are the hook's owner's.
	s.routes = append(s.routes, "POST /v1/hooks/{name}")
	s.hookMux = http.NewServeMux()
	s.hookMux.HandleFunc("/v1/hooks/{name}", func(w http.ResponseWriter, r *http.Request) {
		if s.hooks == nil {
			refuseUnread(w, r, http.StatusNotFound, &engine.Error{Code: engine.CodeNotFound, Class: engine.ClassProtocol,
				Message: "no hook is configured on this daemon (a hook block in its config serves one)"})
			return
		}
		s.hooks.ServeHTTP(w, r)
	})
	_, _ = openAPIJSON() // converted at start, not on the first request
	return s
}

// handle registers h for pattern ("METHOD /path") and records the route.
// Every route goes through here, so that the route table is whole.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, h)
}

// SetTokens swaps the bearer tokens accepted on TCP (a config reload).
// Requests already identified keep their identity.
func (s *Server) SetTokens(t *Tokens) { s.tokens.Store(t) }

// ServeHTTP establishes the caller's identity and refuses unknown API
// versions, unknown paths, wrong methods and a body on a GET before
// reading anything else, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/"+Version+"/hooks/") {
		s.hookMux.ServeHTTP(w, r)
		return
	}
	id, why := s.identify(r)
	if id == nil {
		if r.Context().Value(networkKey) != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
		}
		refuseUnread(w, r, http.StatusUnauthorized, &engine.Error{Code: CodeIdentity, Class: engine.ClassProtocol, Message: why})
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/"+Version+"/") {
		refuseUnread(w, r, http.StatusNotFound, &engine.Error{Code: CodeAPIVersion, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("unknown API version in %q: this daemon speaks /%s/", r.URL.Path, Version)})
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), identityKey, id))
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(w, r)
		return
	}
	if err := checkPath(r.URL.Path); err != nil {
		refuseUnread(w, r, http.StatusBadRequest, err)
		return
	}
	// A GET takes no body: refused unread, whatever its size (-1 is a
	// chunked one), as the endpoints that read one bound it.
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ContentLength != 0 {
		refuseUnread(w, r, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: r.Method + " takes no body"})
		return
	}
	r, release, ok := s.admitRequest(w, r, id)
	if !ok {
		return
	}
	defer release()
	s.mux.ServeHTTP(w, r)
}

// checkPath refuses a path whose segments (run ids, node names of waits)
// are longer than engine.MaxIDBytes or not printable UTF-8: they become
// parts of store keys and are echoed to operators.
func checkPath(path string) *engine.Error {
	for _, seg := range strings.Split(path, "/") {
		if err := engine.CheckPrintable("a path segment", seg, engine.MaxIDBytes); err != nil {
			var e *engine.Error
			errors.As(err, &e)
			return e
		}
	}
	return nil
}

// noRoute answers a request no pattern matches in JSON: a wrong method on
// a known path (405, with Allow) or an unknown path (404).
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		refuseUnread(w, r, http.StatusMethodNotAllowed, &engine.Error{Code: CodeMethod, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))})
		return
	}
	refuseUnread(w, r, http.StatusNotFound, &engine.Error{Code: CodeNoRoute, Class: engine.ClassProtocol,
		Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
}

// traceContextOf is the request's W3C traceparent and tracestate
// headers, read by the OpenTelemetry propagator, normalised; "" when it
// has no traceparent or a malformed one (ignored, as the W3C spec says:
// the run starts its own trace), and tracestate "" when it has none or a
// malformed one.
func traceContextOf(r *http.Request) (traceParent, traceState string) {
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags()), telemetry.BoundTraceState(sc.TraceState())
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.StartRequest
	if !decodeStart(w, r, &req) {
		return
	}
	if req.Flow == "" {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "flow is required"})
		return
	}
	tp, ts := traceContextOf(r)
	res, err := s.eng.Submit(r.Context(), engine.StartRequest{Owner: ownerFrom(r.Context()), Flow: req.Flow, Input: req.Input, RequestID: req.RequestID,
		TraceParent: tp, TraceState: ts})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeStarted(w, res.RunID, res.Existing, startResultOf(res))
}

// decodeStart reads the body of a request that starts a run into v: the
// request id it carries is checked as sent, before decoding could have
// changed it (rawRequestID).
func decodeStart(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := decodeBody(w, r, MaxStartBody, v)
	if !ok {
		return false
	}
	if err := rawRequestID(body); err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequestID, Class: engine.ClassProtocol, Message: err.Error()})
		return false
	}
	return true
}

// writeStarted answers a start: 201 with Location naming the new run, or
// 200 when the request id had started it before.
func writeStarted(w http.ResponseWriter, runID string, existing bool, v any) {
	status := http.StatusCreated
	if existing {
		status = http.StatusOK
	} else {
		w.Header().Set("Location", "/"+Version+"/runs/"+url.PathEscape(runID))
	}
	writeJSON(w, status, v)
}

// getRun is GET /v1/runs/{id}[?wait=DURATION[&until=PHASE]]. With wait
// it answers as soon as the run is terminal (or in PHASE), or when
// DURATION (at most apitypes.MaxRunWait) passes with the run as it is
// then: one round trip for a client waiting for a run's end.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "wait", "until") {
		return
	}
	if q := r.URL.Query(); q.Has("wait") || q.Has("until") {
		s.getRunWait(w, r)
		return
	}
	v, err := s.runView(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "limit", "phase", "after", "flow", "parent", "order", "before", "request_id") {
		return
	}
	if r.URL.Query().Has("request_id") {
		s.runByRequestID(w, r)
		return
	}
	p, ok := s.listParams(w, r)
	if !ok {
		return
	}
	runs, err := s.eng.List(r.Context(), ownerFrom(r.Context()), p)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := make([]*apitypes.Run, 0, len(runs))
	for _, run := range runs {
		out = append(out, ViewOf(run, nil))
	}
	writeJSON(w, http.StatusOK, out)
}

// runByRequestID is GET /v1/runs?request_id=X: the caller's run that a
// start with request id X created, as a list of that one run, or [] when
// the caller started none with it. Only the caller's own request ids are
// looked up (the dedup record is keyed by owner and request id), so
// another owner's run is never found, as with a run id. The id names at
// most one run: no filter or page applies, and one given with it is
// refused rather than ignored.
func (s *Server) runByRequestID(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if len(q) > 1 {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: "request_id names at most one run: give it without other parameters"})
		return
	}
	id := q.Get("request_id")
	if id == "" {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: "request_id is empty"})
		return
	}
	run, err := s.eng.GetByRequestID(r.Context(), ownerFrom(r.Context()), id)
	var e *engine.Error
	if errors.As(err, &e) && e.Code == engine.CodeNotFound {
		writeJSON(w, http.StatusOK, []*apitypes.Run{})
		return
	}
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, []*apitypes.Run{ViewOf(run, nil)})
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) || !emptyBody(w, r) {
		return
	}
	a, err := s.eng.Cancel(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitypes.CancelResponse{Answer: apitypes.CancelAnswer(a)})
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "after", "limit") {
		return
	}
	after, limit, ok := eventPageParams(w, r)
	if !ok {
		return
	}
	evs, err := s.eng.Events(r.Context(), ownerFrom(r.Context()), r.PathValue("id"), after, limit)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeEvents(w, evs)
}

// writeEvents answers a list of events: [] when there are none.
func writeEvents(w http.ResponseWriter, evs []*store.Event) {
	out := convertAll(evs, eventOf)
	if out == nil {
		out = []*apitypes.Event{}
	}
	writeJSON(w, http.StatusOK, out)
}

// registerFlows is POST /v1/flows: the files registered as the caller's.
func (s *Server) registerFlows(w http.ResponseWriter, r *http.Request) {
	s.flowFiles(w, r, func(ctx context.Context, files []engine.SourceFile) (*engine.RegisterResult, error) {
		return s.eng.RegisterAs(ctx, ownerFrom(ctx), files)
	})
}

// checkFlows is POST /v1/flows/check: registration's checks, against the
// registered flows and the daemon's plugins, storing nothing. It answers
// as a registration would (200 with the versions, 422 with diagnostics).
func (s *Server) checkFlows(w http.ResponseWriter, r *http.Request) {
	s.flowFiles(w, r, s.eng.Check)
}

// flowFiles reads a body of flow files, hands them to do, and answers
// do's result: 200 (warnings included) or 422 with the errors.
func (s *Server) flowFiles(w http.ResponseWriter, r *http.Request, do func(context.Context, []engine.SourceFile) (*engine.RegisterResult, error)) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.RegisterRequest
	if !decode(w, r, MaxRegisterBody, &req) {
		return
	}
	if len(req.Files) == 0 {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "no files"})
		return
	}
	res, err := do(r.Context(), convertAll(req.Files, sourceFileOf))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	if errs := res.Diagnostics.Errors(); len(errs) > 0 { // warnings come back with a 200
		writeJSON(w, http.StatusUnprocessableEntity, registerRefusalOf(res, errs))
		return
	}
	writeJSON(w, http.StatusOK, registerResultOf(res))
}

// listFlows is GET /v1/flows: one page of the registered flows by name
// (limit, at most apitypes.MaxFlowListLimit; after, the last name of the
// page before), each with its doc's summary line. A page shorter than
// its limit is the last.
func (s *Server) listFlows(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "limit", "after") {
		return
	}
	q := r.URL.Query()
	limit, ok := limitParam(w, q.Get("limit"), apitypes.DefaultFlowListLimit, apitypes.MaxFlowListLimit)
	if !ok {
		return
	}
	if err := engine.CheckPrintable("after", q.Get("after"), engine.MaxIDBytes); err != nil {
		writeEngineErr(w, err)
		return
	}
	fl, err := s.eng.Flows(r.Context(), engine.FlowListParams{After: q.Get("after"), Limit: limit})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, convertAll(fl, flowOf))
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, statsOf(s.eng.Stats()))
}

// statsOwners lists each owner's use and share: every owner to the
// operator (the daemon's own OS user on the socket, as for the admin
// endpoints), only the caller's own to anyone else, who may not learn
// what other owners run.
func (s *Server) statsOwners(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	all := s.isOperator(r)
	owner := ownerFrom(r.Context())
	if all {
		owner = ""
	}
	list, err := s.eng.OwnerStats(r.Context(), owner)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &apitypes.OwnerStatsList{Owners: convertAll(list, func(o engine.OwnerStats) apitypes.OwnerStats { return apitypes.OwnerStats(o) }), All: all})
}

// retryAfterSeconds is d as a Retry-After: whole seconds, rounded up, at
// least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1))
}

// health answers 200 while admission is open and 503 otherwise, so that a
// load balancer or a probe stops sending work to a daemon that drains or
// whose store failed; the body says which, in both cases.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var cfg *apitypes.ConfigInfo
	if s.daemon != nil {
		ci := s.daemon.ConfigInfo()
		cfg = &ci
	}
	st := statusOf(s.eng.Health(r.Context()), cfg, identityFrom(r.Context()))
	if s.daemon != nil {
		st.ServersDown = s.daemon.ServersDown()
	}
	status := http.StatusOK
	if !st.Open() {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, st)
}

// decode reads a bounded JSON body strictly: unknown fields and trailing
// data are refused.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	_, ok := decodeBody(w, r, limit, v)
	return ok
}

// decodeBody is decode that also returns the body as it was sent, for
// the checks decoding would defeat (rawRequestID).
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeErr(w, http.StatusRequestEntityTooLarge, &engine.Error{Code: CodeTooLarge, Class: engine.ClassProtocol,
				Message: fmt.Sprintf("request body is larger than this endpoint's limit of %d bytes", limit)})
			return nil, false
		}
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "reading body: " + err.Error()})
		return nil, false
	}
	if err := DecodeStrict(body, v); err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: err.Error()})
		return nil, false
	}
	return body, true
}

// rawRequestID checks a start body's request_id as it was sent: decoding
// has already turned an invalid UTF-8 byte or a lone surrogate escape
// into U+FFFD, which would make two different ids one.
func rawRequestID(body []byte) error {
	var raw struct {
		RequestID json.RawMessage `json:"request_id"`
	}
	if json.Unmarshal(body, &raw) != nil || len(raw.RequestID) == 0 {
		return nil // decodeBody accepted the body; no request_id
	}
	return requestid.CheckJSON(raw.RequestID)
}

// DecodeStrict decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed request body: %v", err)
	}
	// Only white space may follow. (Decoder.More alone would let a
	// closing bracket through: it answers for the enclosing value.)
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 { // JSON white space only
		return errors.New("malformed request body: data after the JSON value")
	}
	return nil
}

// emptyBody refuses a body on endpoints that take none.
func emptyBody(w http.ResponseWriter, r *http.Request) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxSmallBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeErr(w, http.StatusRequestEntityTooLarge, &engine.Error{Code: CodeTooLarge, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("this endpoint takes no body, and this one is larger than %d bytes", MaxSmallBody)})
		return false
	}
	if err != nil || len(bytes.TrimSpace(b)) > 0 {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "this endpoint takes no body"})
		return false
	}
	return true
}

// Bounds of the limit parameter: one answer cannot be made unbounded.
const (
	MaxListLimit  = apitypes.MaxListLimit
	MaxEventLimit = apitypes.MaxEventLimit
)

// limitParam reads a limit in [1, max]; empty means def.
// eventPageParams reads ?after=SEQ&limit=N of an event listing (from the
// start, 1000 events, by default), answering the refusal if they are
// wrong.
func eventPageParams(w http.ResponseWriter, r *http.Request) (after uint64, limit int, ok bool) {
	q := r.URL.Query()
	after, err := strconv.ParseUint(orDefault(q.Get("after"), "0"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "after must be a sequence number"})
		return 0, 0, false
	}
	limit, ok = limitParam(w, q.Get("limit"), 1000, MaxEventLimit)
	return after, limit, ok
}

func limitParam(w http.ResponseWriter, s string, def, max int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", max, s)})
		return 0, false
	}
	return n, true
}

// queryParams refuses query parameters the endpoint does not take, and
// repeated ones: a misspelt parameter is an error, not a silent default.
func queryParams(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		refuseUnread(w, r, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "malformed query: " + err.Error()})
		return false
	}
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			msg := fmt.Sprintf("unknown query parameter %q", k)
			if len(allowed) > 0 {
				msg += fmt.Sprintf(" (this endpoint takes %s)", strings.Join(allowed, ", "))
			} else {
				msg += " (this endpoint takes none)"
			}
			refuseUnread(w, r, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: msg})
			return false
		}
		if len(vs) > 1 {
			refuseUnread(w, r, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: fmt.Sprintf("query parameter %q is repeated", k)})
			return false
		}
	}
	return true
}

var knownPhases = map[store.Phase]bool{
	store.PhaseQueued: true, store.PhaseRunning: true, store.PhaseWaiting: true, store.PhaseCompleting: true,
	store.PhaseCompleted: true, store.PhaseCancelled: true, store.PhaseFailed: true,
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

// refuseUnread answers a request refused before its body was read. The
// connection is closed after the answer: otherwise the server would read
// and discard the body first to reuse the connection, and a client that
// sends a large or endless body would wait for nothing.
func refuseUnread(w http.ResponseWriter, r *http.Request, status int, e *engine.Error) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeErr(w, status, e)
}

// writeEngineErr maps an engine error to its HTTP status by class and code.
// writeConflictErr is writeEngineErr, but an engine error with one of
// codes is a conflict with the run's state (409).
func writeConflictErr(w http.ResponseWriter, err error, codes ...string) {
	var e *engine.Error
	if errors.As(err, &e) && slices.Contains(codes, e.Code) {
		writeErr(w, http.StatusConflict, e)
		return
	}
	writeEngineErr(w, err)
}

func writeEngineErr(w http.ResponseWriter, err error) {
	var e *engine.Error
	if !errors.As(err, &e) {
		e = &engine.Error{Code: CodeInternal, Class: engine.ClassStorage, Message: err.Error()}
	}
	status, retryAfter := ErrorStatus(e)
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeErr(w, status, e)
}

// ErrorStatus is the HTTP status the API answers e with, and its
// Retry-After in seconds ("" for none).
func ErrorStatus(e *engine.Error) (status int, retryAfter string) {
	status = http.StatusBadRequest
	switch {
	case e.Class == engine.ClassStorage:
		status = http.StatusServiceUnavailable
	case e.Code == engine.CodeForbidden:
		status = http.StatusForbidden
	case e.Code == engine.CodeNotFound || e.Code == engine.CodeUnknownFlow:
		status = http.StatusNotFound
	case e.Code == engine.CodeDedupConflict:
		status = http.StatusConflict
	case e.Code == engine.CodeQueueFull:
		status, retryAfter = http.StatusTooManyRequests, strconv.Itoa(int(QueueFullRetryAfter/time.Second))
	case e.Code == engine.CodeOwnerQuota || e.Code == engine.CodeOwnerBudget:
		status, retryAfter = http.StatusTooManyRequests, retryAfterSeconds(e.RetryAfter)
	case e.Code == engine.CodeDraining:
		status = http.StatusServiceUnavailable
	case e.Code == CodeConfig || e.Code == CodeNoConfig:
		status = http.StatusUnprocessableEntity
	case e.Class == engine.ClassRun:
		status = http.StatusUnprocessableEntity
	}
	return status, retryAfter
}
