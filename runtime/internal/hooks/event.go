package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/weirhq/weir/runtime/engine"
)

// errNotJSON is a body that is not one JSON document.
var errNotJSON = errors.New("the delivery's body is not JSON: nothing was accepted")

// event makes the event of a delivery whose signature holds: its name
// (and the header's part of it), its id, its key and its payload. Every
// problem is the sender's (400).
func (h *Hook) event(hdr http.Header, body []byte) (Event, error) {
	if !json.Valid(body) {
		return Event{}, errNotJSON
	}
	ev := Event{Name: h.Event, Payload: json.RawMessage(body)}
	if h.EventHeader != "" {
		v, err := headerValue(hdr, h.EventHeader, "the event's name")
		if err != nil {
			return Event{}, err
		}
		ev.Name = h.Event + "." + v
		if err := CheckEventName(ev.Name); err != nil {
			return Event{}, fmt.Errorf("%s: %w", h.EventHeader, err)
		}
	}
	var doc any
	if h.IDKey != "" || h.Key != "" {
		var err error
		if doc, err = decodeDoc(body); err != nil {
			return Event{}, errNotJSON
		}
	}
	id, err := h.eventID(hdr, doc)
	if err != nil {
		return Event{}, err
	}
	ev.ID = id
	if ev.Key, err = h.eventKey(doc); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// eventID is the delivery's id: the provider sends it again with every
// retry of the delivery, so it is what makes a retry a duplicate.
func (h *Hook) eventID(hdr http.Header, doc any) (string, error) {
	var id string
	if h.IDHeader != "" {
		v, err := headerValue(hdr, h.IDHeader, "the delivery id, the event's id")
		if err != nil {
			return "", err
		}
		id = v
	} else {
		toks, _ := ParsePointer(h.IDKey) // checked with the hook
		v, err := scalarAt(doc, toks)
		switch {
		case errors.Is(err, errNoValue):
			return "", fmt.Errorf("the body has no delivery id at id_key %s", h.IDKey)
		case err != nil:
			return "", fmt.Errorf("the delivery id at id_key %s is %v", h.IDKey, err)
		}
		id = v
	}
	if id == "" {
		return "", errors.New("the delivery id is empty")
	}
	return id, printable("the delivery id", id, MaxIDBytes)
}

// eventKey is the value at the hook's key pointer. A pointer that names
// nothing gives no key rather than a refusal: one provider sends several
// kinds of delivery to one hook, and not all of them carry the field.
func (h *Hook) eventKey(doc any) (string, error) {
	if h.Key == "" {
		return "", nil
	}
	toks, _ := ParsePointer(h.Key) // checked with the hook
	k, err := scalarAt(doc, toks)
	switch {
	case errors.Is(err, errNoValue):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("the event key at %s is %v", h.Key, err)
	}
	return k, printable("the event key", k, MaxKeyBytes)
}

// printable is engine.CheckPrintable's refusal as this package words it:
// the message alone (the code is the answer's).
func printable(what, s string, max int) error {
	var e *engine.Error
	if err := engine.CheckPrintable(what, s, max); errors.As(err, &e) {
		return errors.New(e.Message)
	} else if err != nil {
		return err
	}
	return nil
}

// headerValue is a header's one value; what says what it is for.
func headerValue(hdr http.Header, name, what string) (string, error) {
	v, n := single(hdr, name)
	switch {
	case n == 0:
		return "", fmt.Errorf("the delivery has no %s header (%s)", name, what)
	case n > 1:
		return "", fmt.Errorf("the delivery has %d %s headers; one is expected", n, name)
	}
	return v, nil
}

// single is a header's value, trimmed, and how many values it has (an
// empty one counts as none): two would leave open which one was used.
func single(hdr http.Header, name string) (string, int) {
	vs := hdr.Values(name)
	if len(vs) == 1 && strings.TrimSpace(vs[0]) == "" {
		return "", 0
	}
	if len(vs) != 1 {
		return "", len(vs)
	}
	return strings.TrimSpace(vs[0]), 1
}
