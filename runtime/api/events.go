package api

import (
	"net/http"
	"strconv"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// routeEvents registers the caller's events and triggers (engine.Ops):
// send and list events, list and remove triggers. A trigger is
// registered with the flow file that declares it; a webhook's events
// come through the hooks route instead (WithHooks).
func (s *Server) routeEvents() {
	s.handle("POST /v1/events", s.eventSend)
	s.handle("GET /v1/events", s.eventList)
	s.handle("GET /v1/triggers", s.triggerList)
	s.handle("DELETE /v1/triggers/{name}", s.triggerRemove)
}

// MaxEventBody bounds the body of POST /v1/events: the payload's bound
// and room for the rest.
const MaxEventBody = engine.MaxEventPayloadBytes + 16<<10

// eventSend is POST /v1/events: 201 with the event accepted, 200 with the
// stored one when its id was accepted before.
func (s *Server) eventSend(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.EventSendRequest
	if _, ok := decodeBody(w, r, MaxEventBody, &req); !ok {
		return
	}
	res, err := s.eng.Ops().EventSend(r.Context(), engine.EventSendParams{Owner: ownerFrom(r.Context()), ID: req.ID, Name: req.Name, Key: req.Key, Payload: req.Payload})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := ownerEventOf(res.Event)
	out.Duplicate = res.Duplicate
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, out)
}

func (s *Server) eventList(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "after", "limit", "undelivered") {
		return
	}
	q := r.URL.Query()
	after, err := strconv.ParseUint(orDefault(q.Get("after"), "0"), 10, 64)
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "after must be an event's seq"})
		return
	}
	undelivered, err := strconv.ParseBool(orDefault(q.Get("undelivered"), "false"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: engine.CodeBadRequest, Class: engine.ClassProtocol, Message: "undelivered must be true or false"})
		return
	}
	limit, ok := limitParam(w, q.Get("limit"), 100, MaxListLimit)
	if !ok {
		return
	}
	evs, err := s.eng.Ops().Events(r.Context(), engine.EventListParams{Owner: ownerFrom(r.Context()), AfterSeq: after, Undelivered: undelivered, Limit: limit})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, convertAllEmpty(evs, ownerEventOf))
}

func (s *Server) triggerList(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "limit") {
		return
	}
	limit, ok := limitParam(w, r.URL.Query().Get("limit"), 100, MaxListLimit)
	if !ok {
		return
	}
	ts, err := s.eng.Ops().Triggers(r.Context(), ownerFrom(r.Context()), limit)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, convertAllEmpty(ts, triggerOf))
}

func (s *Server) triggerRemove(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	if err := s.eng.Ops().TriggerRemove(r.Context(), ownerFrom(r.Context()), r.PathValue("name")); err != nil {
		writeEngineErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func ownerEventOf(ev *store.OwnerEvent) *apitypes.OwnerEvent {
	out := &apitypes.OwnerEvent{ID: ev.ID, Name: ev.Name, Key: ev.Key, Payload: ev.Payload, Seq: ev.Seq, Delivered: ev.Delivered,
		TriggersPending: ev.TriggersPending, Started: []apitypes.EventStart{}, AcceptedAt: ev.AcceptedAt}
	if out.Delivered == nil {
		out.Delivered = []string{}
	}
	for _, st := range ev.Started {
		out.Started = append(out.Started, apitypes.EventStart{Trigger: st.Trigger, RunID: st.RunID, Skipped: st.Skipped})
	}
	return out
}

func triggerOf(t *store.Trigger) *apitypes.Trigger {
	return &apitypes.Trigger{Name: t.Name, Event: t.Event, Flow: t.Flow, Input: t.InputFn != "", Filter: t.FilterFn != "",
		Source: t.Source, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}
