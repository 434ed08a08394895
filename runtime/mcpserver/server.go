package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/panics"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// Daemon is what the server asks of weir's daemon; *client.Client is one.
type Daemon interface {
	FlowList(ctx context.Context) ([]apitypes.Flow, error)
	RunStart(ctx context.Context, req apitypes.StartRequest) (*apitypes.StartResult, error)
	RunGet(ctx context.Context, id string) (*apitypes.Run, error)
	RunEvents(ctx context.Context, id string, p client.EventListParams) ([]apitypes.Event, error)
	RunWaits(ctx context.Context, id string) ([]apitypes.HumanWait, error)
	RunCancel(ctx context.Context, id string) (apitypes.CancelAnswer, error)
	RunApprove(ctx context.Context, id, wait string, payload json.RawMessage) (*apitypes.DecideResponse, error)
	RunReject(ctx context.Context, id, wait, reason string) (*apitypes.DecideResponse, error)
	RunRespond(ctx context.Context, id, wait string, result json.RawMessage, digest string) (*apitypes.DecideResponse, error)
	Resolve(ctx context.Context, runID, waitID string, happened bool, result json.RawMessage, reason string) (*apitypes.ResolveResponse, error)
	Redrive(ctx context.Context, req apitypes.RedriveRequest) (*apitypes.RedriveResponse, error)
	Fork(ctx context.Context, id string, req apitypes.ForkRequest) (*apitypes.ForkResult, error)
	RunBudgetAdd(ctx context.Context, runID string, req apitypes.BudgetAddRequest) (*apitypes.BudgetAddResponse, error)
}

var _ Daemon = (*client.Client)(nil)

// Names a client uses.
const (
	// CancelRunTool is the tool that cancels a run by id. A flow of the
	// same name as a built-in tool is not offered (the tool wins).
	CancelRunTool = "cancel_run"
	// WaitRunTool follows a run by id as a flow's call does: a client
	// whose call answered that its run still works calls it to go on
	// waiting.
	WaitRunTool = "wait_run"
	// ApproveTool and RejectTool decide a run's open human wait, for
	// clients without elicitation, then follow the run as a call does.
	ApproveTool = "approve_wait"
	RejectTool  = "reject_wait"
	// ArgRequestID is the argument that carries the caller's request id;
	// it is taken out of the arguments before they become the run's input.
	ArgRequestID = "weir_request_id"
	// MetaRequestID is the _meta key that carries it, for clients that
	// keep arguments for the flow alone.
	MetaRequestID = "weir/request_id"
	// RunURIPrefix starts a run's resources: weir://runs/ID (its state)
	// and weir://runs/ID/timeline (its events).
	RunURIPrefix = "weir://runs/"
)

// Limits and defaults.
const (
	// DefaultFollow is how long one call follows its run before it
	// answers that the run still works (with its id and phase): below
	// the 60 s a client's request times out at by default (the official
	// TypeScript SDK's), so that the client hears the run's id.
	DefaultFollow = 55 * time.Second
	// DefaultHeartbeat is the longest time between two progress
	// notifications of a followed run, sent again unchanged when nothing
	// moved: a client that resets its timeout on progress keeps waiting.
	DefaultHeartbeat = 10 * time.Second
	// DefaultPoll is how often a followed run is read.
	DefaultPoll = 100 * time.Millisecond
	// DefaultWatch is how often a served session's tools are read again.
	DefaultWatch = 5 * time.Second
	// maxTimelineEvents bounds the events one timeline read returns (the
	// first ones; the CLI's `weir run events` pages through the rest).
	maxTimelineEvents = apitypes.MaxEventLimit
	// MaxToolSchemaBytes bounds one tool's input schema: a client sends
	// the list to a model at every turn, and a page of tools/list holds
	// ToolPageSize of them. A flow whose schema is larger is not offered.
	MaxToolSchemaBytes = apitypes.MaxListedInputBytes + 1024
	// ToolPageSize bounds the tools of one tools/list page.
	ToolPageSize = 100
)

// Options configures a Server.
type Options struct {
	// Follow bounds how long a call follows its run (DefaultFollow if 0).
	Follow time.Duration
	// Poll is the time between two reads of a followed run (DefaultPoll
	// if 0).
	Poll time.Duration
	// Heartbeat is the longest time between two progress notifications
	// (DefaultHeartbeat if 0).
	Heartbeat time.Duration
	// Stateless makes Handler serve the streamable HTTP transport without
	// sessions (the SDK's stateless mode, the only one that speaks
	// protocol 2026-07-28): every request stands alone, and its token is
	// checked with the daemon every time. Serve ignores it.
	Stateless bool
	// Logger receives what the server has to say (discarded if nil).
	Logger *slog.Logger
	// Version is the server's version in its serverInfo ("dev" if empty).
	Version string
	// Watch is how often a served session's tools are read again from
	// the daemon, so that a flow registered meanwhile reaches the client
	// as notifications/tools/list_changed (DefaultWatch if 0).
	Watch time.Duration
	// sessionID makes session ids (HTTP binds them to a token).
	sessionID func() string
}

// Server is an MCP server whose tools are the daemon's registered flows.
type Server struct {
	d   Daemon
	o   Options
	mcp *mcp.Server

	mu      sync.Mutex
	flows   map[string]string // tool name → flow version hash offered
	refused map[string]string // flow name → version hash not offered (logged once)
}

// New returns a server over d. Its tools are read from the daemon at
// every tools/list, so a flow registered later is offered then.
func New(d Daemon, o Options) *Server {
	if o.Follow <= 0 {
		o.Follow = DefaultFollow
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Watch <= 0 {
		o.Watch = DefaultWatch
	}
	s := &Server{d: d, o: o, flows: map[string]string{}, refused: map[string]string{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "weir", Title: "weir flows", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Each tool starts a durable weir run of the flow of that name and answers with its output. " +
			"Pass weir_request_id (or _meta weir/request_id) to make a retried call return the same run. " +
			"A call answers before its bound with the run's id and phase when the run still works: call wait_run to go on waiting. " +
			"A run waiting for a human decision asks for it (elicitation) or answers how to decide it (approve_wait, reject_wait); cancel_run cancels a run. " +
			"After something went wrong: resolve_outcome settles an unknown outcome, redrive sends dead letters back, fork_run starts a run again from a step.",
		Logger: o.Logger,
		// Flows come and go: clients are told when the list changes.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Resources: &mcp.ResourceCapabilities{}},
		GetSessionID: o.sessionID,
		// A page of tools/list is at most this many schemas of at most
		// MaxToolSchemaBytes each.
		PageSize: ToolPageSize,
	})
	s.mcp.AddTool(&mcp.Tool{
		Name:        CancelRunTool,
		Description: "Cancel a weir run by id. Answers requested, too_late (its finish was already decided) or already_terminal.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"run_id":{"type":"string"}},"required":["run_id"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: ptr(true)},
	}, s.cancelRun)
	s.addDecisionTools()
	s.addOpsTools()
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "run", URITemplate: RunURIPrefix + "{id}", MIMEType: "application/json",
		Description: "A weir run's state: phase, progress, output or error.",
	}, s.readRun)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "timeline", URITemplate: RunURIPrefix + "{id}/timeline", MIMEType: "application/json",
		Description: fmt.Sprintf("A weir run's timeline: its first %d events, what the system did.", maxTimelineEvents),
	}, s.readTimeline)
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			if method == "tools/list" {
				if err := s.Refresh(ctx); err != nil {
					return nil, err
				}
			}
			// The SDK recovers nothing: a panic on one request's data
			// would end the process, and with it every client's session.
			if perr := panics.Catch("MCP "+method, func() error {
				res, err = next(ctx, method, req)
				return nil
			}); perr != nil {
				s.o.Logger.Error("MCP request panicked", "method", method, "error", perr.Error(), "stack", perr.(*panics.Error).Stack)
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: perr.Error()}
			}
			return res, err
		}
	})
	return s
}

func ptr[T any](v T) *T { return &v }

// MCP returns the underlying MCP server (to run on a transport).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Serve speaks MCP on t (mcp.StdioTransport for stdio) until the client
// leaves or ctx ends.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	if err := s.Refresh(ctx); err != nil {
		return err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.watch(wctx)
	return s.mcp.Run(ctx, t)
}

// watch reads the daemon's flows every Watch until ctx ends: a change
// adds or removes tools, and the SDK tells the session's client
// (tools/list_changed). A failed read is logged and tried at the next.
func (s *Server) watch(ctx context.Context) {
	t := time.NewTicker(s.o.Watch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				s.o.Logger.Warn("reading the daemon's flows", "error", err)
			}
		}
	}
}

// Refresh makes the server's tools the daemon's registered flows (their
// latest versions), adding, replacing and removing as needed. A flow
// that cannot be a tool (its schema is too large for a listing, or the
// SDK refuses it, even by panicking) is left out with a logged reason:
// one user's flow never takes the list, or the server, from the others.
func (s *Server) Refresh(ctx context.Context) error {
	fl, err := s.d.FlowList(ctx)
	if err != nil {
		return fmt.Errorf("listing the daemon's flows: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var gone []string
	for _, f := range fl {
		if builtinTools[f.Name] {
			s.o.Logger.Warn("flow not offered: its name is a built-in tool's", "flow", f.Name)
			continue
		}
		seen[f.Name] = true
		if s.flows[f.Name] == f.Hash || s.refused[f.Name] == f.Hash {
			continue
		}
		if err := s.offer(f); err != nil {
			// An older version offered before must not stay in the list
			// with a schema that is no longer the flow's.
			if _, ok := s.flows[f.Name]; ok {
				delete(s.flows, f.Name)
				gone = append(gone, f.Name)
			}
			s.refused[f.Name] = f.Hash
			s.o.Logger.Warn("flow not offered as a tool", "flow", f.Name, "hash", f.Hash, "reason", err.Error())
			continue
		}
		delete(s.refused, f.Name)
		s.flows[f.Name] = f.Hash
	}
	for n := range s.flows {
		if !seen[n] {
			gone = append(gone, n)
			delete(s.flows, n)
		}
	}
	for n := range s.refused {
		if !seen[n] {
			delete(s.refused, n)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	return nil
}

// offer adds (or replaces) the tool of flow f. The SDK panics on input
// schemas it does not accept (an x-mcp-header it cannot bind, among
// others); the schema is the flow author's, so that is f's error.
func (s *Server) offer(f apitypes.Flow) error {
	if f.InputOmitted {
		return fmt.Errorf("its input schema is larger than a listing carries (%d bytes)", apitypes.MaxListedInputBytes)
	}
	schema, wrapped := inputSchema(f.Input)
	if len(schema) > MaxToolSchemaBytes {
		return fmt.Errorf("its input schema as a tool is %d bytes, more than %d (MaxToolSchemaBytes)", len(schema), MaxToolSchemaBytes)
	}
	tool := &mcp.Tool{Name: f.Name, Description: flowDescription(f), InputSchema: schema}
	return panics.Catch("offering flow "+f.Name+" as a tool", func() error {
		s.mcp.AddTool(tool, s.callFlow(f.Name, wrapped))
		return nil
	})
}

func flowDescription(f apitypes.Flow) string {
	d := flows.DocSummary(f.Doc)
	if d == "" {
		d = "Run the weir flow " + f.Name + "."
	}
	return d + " (a durable weir run; answers its output, or how to decide a human wait)"
}

// inputSchema is the tool's input schema for a flow's: MCP wants an
// object. An object schema (or none) is offered as the flow's with the
// optional ArgRequestID beside its properties; any other is wrapped as
// {"input": SCHEMA} (wrapped true: the run's input is that argument).
func inputSchema(flowInput json.RawMessage) (json.RawMessage, bool) {
	reqID := json.RawMessage(`{"type":"string","description":"your business id for this call: the same id returns the same run"}`)
	var m map[string]json.RawMessage
	if len(flowInput) == 0 || string(flowInput) == "null" {
		m = map[string]json.RawMessage{"type": json.RawMessage(`"object"`)}
	} else if json.Unmarshal(flowInput, &m) != nil || string(m["type"]) != `"object"` {
		b, _ := json.Marshal(map[string]any{"type": "object", "required": []string{"input"},
			"properties": map[string]any{"input": flowInput, ArgRequestID: reqID}})
		return b, true
	}
	props := map[string]json.RawMessage{}
	if p, ok := m["properties"]; ok {
		_ = json.Unmarshal(p, &props)
	}
	props[ArgRequestID] = reqID
	m["properties"], _ = json.Marshal(props)
	b, _ := json.Marshal(m)
	return b, false
}

// callFlow is the handler of a flow's tool.
func (s *Server) callFlow(flow string, wrapped bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			return s.resume(ctx, req), nil
		}
		args := map[string]json.RawMessage{}
		if len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, "the arguments are not a JSON object: "+err.Error()), nil
			}
		}
		reqID, _ := req.Params.Meta[MetaRequestID].(string)
		if raw, ok := args[ArgRequestID]; ok {
			if err := json.Unmarshal(raw, &reqID); err != nil {
				return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, ArgRequestID+" must be a string"), nil
			}
			delete(args, ArgRequestID)
		}
		if reqID == "" {
			reqID = freshRequestID()
		}
		input, _ := json.Marshal(args)
		if wrapped {
			input = args["input"]
		}
		res, err := s.d.RunStart(ctx, apitypes.StartRequest{Flow: flow, Input: input, RequestID: reqID})
		if err != nil {
			return apiRefusal(err), nil
		}
		return s.follow(ctx, req, res.RunID, nil), nil
	}
}

// freshRequestID names a call whose client gave no id: unique, so the
// call starts a run of its own.
func freshRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

// follow reads the run until it ends, parks on a human wait, the follow
// bound passes or the client goes away, reporting progress meanwhile. A
// wait whose client declared elicitation is asked of the person there
// and then, and the run followed on once decided.
func (s *Server) follow(ctx context.Context, req *mcp.CallToolRequest, id string, asked asked) *mcp.CallToolResult {
	tok := req.Params.GetProgressToken()
	var step float64
	var lastSent time.Time
	report := func(msg string) {
		if tok == nil {
			return
		}
		step++
		lastSent = time.Now()
		// Display only: a lost notification changes nothing.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: step, Message: msg})
	}
	// The first report carries the run's id: a client that cancels or
	// drops the call still knows which run goes on.
	last := "run " + id + " accepted"
	report(last)
	deadline := time.Now().Add(s.o.Follow)
	bound := time.NewTimer(s.o.Follow)
	defer bound.Stop()
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	if asked == nil {
		asked = map[string]string{}
	}
	for {
		v, err := s.d.RunGet(ctx, id)
		if ctx.Err() != nil {
			return detached(id, "the call was cancelled; the run goes on")
		}
		if err != nil {
			return withRun(apiRefusal(err), id)
		}
		if v.Progress != nil {
			if msg := progressMessage(v); msg != last {
				last = msg
				report(msg)
			}
		}
		if time.Since(lastSent) >= s.o.Heartbeat {
			report(last)
		}
		switch {
		case v.Phase.Terminal():
			return finished(v)
		case v.Phase == apitypes.PhaseWaiting:
			ws, err := s.d.RunWaits(ctx, id)
			if err == nil && len(ws) > 0 {
				res, decided := s.ask(ctx, req, deadline, v, ws, asked)
				if res != nil {
					return res
				}
				if decided {
					// The run goes on, and so does the call.
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
			return detached(id, "the call was cancelled; the run goes on")
		case <-bound.C:
			return stillWorking(v, s.o.Follow)
		case <-tick.C:
		}
	}
}

func progressMessage(v *apitypes.Run) string {
	p := v.Progress
	msg := fmt.Sprintf("run %s %s: %d nodes done", v.ID, p.Phase, p.Done)
	if p.Node != "" {
		msg += ", at " + p.Node
	}
	if t := p.Tool; t != nil {
		msg += fmt.Sprintf(" (%d/%d)", t.Done, t.Total)
	}
	return msg
}

// result builds a tool result whose structured content is v and whose
// text says the same for a reader.
func result(v map[string]any, text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: v, IsError: isError}
}

func withRun(r *mcp.CallToolResult, id string) *mcp.CallToolResult {
	if m, ok := r.StructuredContent.(map[string]any); ok {
		m["run_id"] = id
	}
	return r
}

func finished(v *apitypes.Run) *mcp.CallToolResult {
	if v.Phase == apitypes.PhaseCompleted {
		out := json.RawMessage(v.Output)
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return result(map[string]any{"run_id": v.ID, "phase": v.Phase, "output": out}, string(out), false)
	}
	e := v.Error
	if e == nil {
		e = &apitypes.RunError{Code: apitypes.CodeCancelled, Message: "the run was " + string(v.Phase)}
	}
	return result(map[string]any{"run_id": v.ID, "phase": v.Phase,
		"error": map[string]any{"code": e.Code, "message": e.Message, "class": apitypes.ClassRun}},
		fmt.Sprintf("run %s %s: %s: %s", v.ID, v.Phase, e.Code, e.Message), true)
}

// stillWorking answers a call whose run goes on past the follow bound:
// its id and phase, and how to follow it.
func stillWorking(v *apitypes.Run, bound time.Duration) *mcp.CallToolResult {
	return result(map[string]any{"run_id": v.ID, "phase": v.Phase, "working": true,
		"follow": map[string]any{"tool": WaitRunTool, "arguments": map[string]any{"run_id": v.ID}, "resource": RunURIPrefix + v.ID}},
		fmt.Sprintf("run %s is still working (%s) after %s; it goes on. Call %s with {\"run_id\": %q} to wait for its answer, read %s%s for its state, or call %s to stop it.",
			v.ID, v.Phase, bound, WaitRunTool, v.ID, RunURIPrefix, v.ID, CancelRunTool), false)
}

func detached(id, why string) *mcp.CallToolResult {
	return result(map[string]any{"run_id": id, "phase": "detached", "note": why},
		fmt.Sprintf("run %s: %s; read %s%s for its state, or call %s to stop it", id, why, RunURIPrefix, id, CancelRunTool), false)
}

func refused(code, class, msg string) *mcp.CallToolResult {
	return result(map[string]any{"error": map[string]any{"code": code, "message": msg, "class": class}}, code+": "+msg, true)
}

// apiRefusal turns the daemon's refusal into a tool error with its code
// and class; a daemon that does not answer is a storage-class error (the
// service cannot keep its promise now; retry later).
func apiRefusal(err error) *mcp.CallToolResult {
	var ae *client.Error
	if errors.As(err, &ae) {
		class := ae.Class
		if class == "" {
			class = apitypes.ClassProtocol
		}
		return refused(ae.Code, class, ae.Message)
	}
	return refused(apitypes.CodeStorage, apitypes.ClassStorage, "the weir daemon did not answer: "+err.Error())
}

func (s *Server) cancelRun(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.RunID == "" {
		return refused(apitypes.CodeBadInput, apitypes.ClassProtocol, "want {\"run_id\": \"...\"}"), nil
	}
	ans, err := s.d.RunCancel(ctx, in.RunID)
	if err != nil {
		return withRun(apiRefusal(err), in.RunID), nil
	}
	return result(map[string]any{"run_id": in.RunID, "answer": ans}, fmt.Sprintf("cancel of run %s: %s", in.RunID, ans), false), nil
}

// runID reads the id out of a run resource's URI.
func runID(uri, suffix string) (string, bool) {
	id, ok := strings.CutPrefix(uri, RunURIPrefix)
	if !ok {
		return "", false
	}
	if suffix != "" {
		if id, ok = strings.CutSuffix(id, suffix); !ok {
			return "", false
		}
	}
	return id, id != "" && !strings.Contains(id, "/")
}

func (s *Server) readRun(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := runID(uri, "")
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	v, err := s.d.RunGet(ctx, id)
	if err != nil {
		return nil, resourceErr(uri, err)
	}
	return jsonResource(uri, v)
}

func (s *Server) readTimeline(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := runID(uri, "/timeline")
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	evs, err := s.d.RunEvents(ctx, id, client.EventListParams{Limit: maxTimelineEvents})
	if err != nil {
		return nil, resourceErr(uri, err)
	}
	return jsonResource(uri, evs)
}

// resourceErr: another owner's run is not found, exactly as a missing one.
func resourceErr(uri string, err error) error {
	if client.ErrorCode(err) == apitypes.CodeNotFound {
		return mcp.ResourceNotFoundError(uri)
	}
	return err
}

func jsonResource(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	// A run is its owner's alone: no intermediary may cache it for
	// others, and it may change at any moment.
	return &mcp.ReadResourceResult{Cacheable: mcp.Cacheable{CacheScope: "private"},
		Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
