package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/clock"
)

// Event is what a delivery becomes: the hook's event name, the delivery
// id as the event id, the key taken from the body, and the body itself.
type Event struct {
	Name    string
	ID      string
	Key     string
	Payload json.RawMessage
}

// Accept takes an event for owner, journal-first, deduplicated on
// (owner, ev.ID): dup reports an event of that id was accepted before
// (nothing new is done). An error that has an HTTPStatus method is
// answered with that status and its text; any other is a 500 whose text
// the sender never sees.
type Accept func(ctx context.Context, owner string, ev Event) (dup bool, err error)

// StatusError is an Accept error the sender is meant to see, with its
// status (a queue full, a quota spent). If an *engine.Error is in its
// chain, that is the answer's body (its code and message).
type StatusError interface {
	error
	HTTPStatus() int
}

// Accepted is the answer to an accepted delivery (202).
type Accepted struct {
	EventID   string `json:"event_id"`
	Duplicate bool   `json:"duplicate"`
}

// Options are a Handler's collaborators; zeros are the wall clock and no
// log.
type Options struct {
	Clock  clock.Clock
	Logger hclog.Logger
}

// Handler serves POST /v1/hooks/{name} (mounted on a pattern with a
// {name} wildcard). It holds the hooks in force; SetHooks swaps them on a
// config reload, so a rotated secret is taken without a restart.
type Handler struct {
	accept Accept
	clock  clock.Clock
	log    hclog.Logger
	hooks  atomic.Pointer[map[string]*Hook]
}

// NewHandler returns a handler serving hooks and handing their events to
// accept. It refuses hooks that fail their checks, or two of one name.
func NewHandler(accept Accept, hooks []Hook, opts Options) (*Handler, error) {
	if accept == nil {
		return nil, errors.New("hooks: no Accept function")
	}
	h := &Handler{accept: accept, clock: opts.Clock, log: opts.Logger}
	if h.clock == nil {
		h.clock = clock.Real()
	}
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	if err := h.SetHooks(hooks); err != nil {
		return nil, err
	}
	return h, nil
}

// SetHooks replaces the hooks in force. On an error nothing changes:
// deliveries go on being checked against the hooks that were in force.
// Deliveries in progress finish with the hook they started with.
func (h *Handler) SetHooks(hooks []Hook) error {
	m := make(map[string]*Hook, len(hooks))
	for i := range hooks {
		hk := hooks[i]
		if ps := hk.Check(); len(ps) > 0 {
			return fmt.Errorf("hook %q: %s", hk.Name, ps[0].Message)
		}
		if _, dup := m[hk.Name]; dup {
			return fmt.Errorf("hook %q is configured twice", hk.Name)
		}
		hk.Secret = append([]byte(nil), hk.Secret...) // the caller's slice may change
		m[hk.Name] = &hk
	}
	h.hooks.Store(&m)
	return nil
}

// ServeHTTP checks one delivery and accepts its event. The order is the
// point: nothing about the body is looked at before its signature holds,
// and nothing is accepted before every check passed.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(w, r, http.StatusMethodNotAllowed, apitypes.CodeMethod, "%s is not allowed on %s (allowed: POST)", r.Method, r.URL.Path)
		return
	}
	// No did-you-mean: the sender is not yet known to be anyone, and the
	// hooks' names are the operator's.
	name := r.PathValue("name")
	hk := (*h.hooks.Load())[name]
	if hk == nil {
		refuse(w, r, http.StatusNotFound, apitypes.CodeNotFound, "no hook %q is configured", textbound.Quote(name))
		return
	}
	body, ok := readBody(w, r, hk.maxBody())
	if !ok {
		return
	}
	if err := hk.Verify(r.Header, body, h.clock.Now()); err != nil {
		var se *SignatureError
		msg := "the delivery's signature does not hold"
		if errors.As(err, &se) {
			msg = se.Reason
		}
		writeErr(w, http.StatusUnauthorized, &engine.Error{Code: apitypes.CodeIdentity, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("hook %q: %s: nothing was accepted", hk.Name, msg)})
		return
	}
	ev, err := hk.event(r.Header, body)
	if err != nil {
		msg := err.Error()
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); errors.Is(err, errNotJSON) && ct == "application/x-www-form-urlencoded" {
			msg += " (the provider sends a form: set its content type to application/json)"
		}
		writeErr(w, http.StatusBadRequest, &engine.Error{Code: apitypes.CodeBadRequest, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("hook %q: %s", hk.Name, msg)})
		return
	}
	dup, err := h.accept(r.Context(), hk.Owner, ev)
	if err != nil {
		h.acceptFailed(w, hk, ev, err)
		return
	}
	writeJSON(w, http.StatusAccepted, Accepted{EventID: ev.ID, Duplicate: dup})
}

// readBody reads the body within max bytes; over it, 413 and false.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	tooLarge := func() {
		refuse(w, r, http.StatusRequestEntityTooLarge, apitypes.CodeTooLarge,
			"the delivery's body is larger than this hook's max_body of %d bytes: nothing was accepted", max)
	}
	if r.ContentLength > max {
		tooLarge()
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	switch {
	case err != nil:
		refuse(w, r, http.StatusBadRequest, apitypes.CodeBadRequest, "reading the delivery's body: %v", err)
		return nil, false
	case int64(len(body)) > max:
		tooLarge()
		return nil, false
	}
	return body, true
}

// acceptFailed answers an Accept error: its own status and text if it
// carries one, else a 500 that names nothing inside (the log does).
func (h *Handler) acceptFailed(w http.ResponseWriter, hk *Hook, ev Event, err error) {
	var se StatusError
	if errors.As(err, &se) && se.HTTPStatus() >= 400 && se.HTTPStatus() <= 599 {
		status := se.HTTPStatus()
		var e *engine.Error
		if !errors.As(err, &e) {
			e = &engine.Error{Code: codeOf(status), Class: engine.ClassProtocol, Message: se.Error()}
		}
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
		}
		writeErr(w, status, e)
		return
	}
	h.log.Error("hook event not accepted", "hook", hk.Name, "event", ev.Name, "event_id", ev.ID, "error", err)
	writeErr(w, http.StatusInternalServerError, &engine.Error{Code: apitypes.CodeInternal, Class: engine.ClassStorage,
		Message: fmt.Sprintf("hook %q: the event could not be accepted; the provider's retry of the delivery will try again", hk.Name)})
}

// codeOf is the refusal code of a status an Accept error carries without
// a code of its own.
func codeOf(status int) string {
	switch {
	case status == http.StatusNotFound:
		return apitypes.CodeNotFound
	case status == http.StatusRequestEntityTooLarge:
		return apitypes.CodeTooLarge
	case status >= 500:
		return apitypes.CodeInternal
	}
	return apitypes.CodeBadRequest
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeErr answers with the API's error body ({code, message, class}).
func writeErr(w http.ResponseWriter, status int, e *engine.Error) { writeJSON(w, status, e) }

// refuse answers a refusal made before the body was read whole. The
// connection is closed after it, as the API does, so a sender of a
// large or endless body is not read to its end first.
func refuse(w http.ResponseWriter, r *http.Request, status int, code, format string, args ...any) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeErr(w, status, &engine.Error{Code: code, Class: engine.ClassProtocol, Message: fmt.Sprintf(format, args...)})
}
