package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// Defaults of the per-owner shares of the API (docs/design.md §8.1).
const (
	// DefaultMaxRequestsPerOwner bounds the requests of one owner in
	// progress at once, streams aside: on one host, one token's callers
	// cannot hold every connection the address may have.
	DefaultMaxRequestsPerOwner = 64
	// DefaultMaxStreamsPerOwner bounds the streams (a run's events, the
	// run list) and held waits (GET /v1/runs/{id}/wait, ?wait=) one owner
	// holds open at once. They last minutes, so they have their own share
	// and do not take the owner's requests.
	DefaultMaxStreamsPerOwner = 32
	// requestsRetryAfter is the Retry-After of E_TOO_MANY_REQUESTS:
	// short requests end within a second or so.
	requestsRetryAfter = time.Second
	// streamsRetryAfter is the Retry-After of E_TOO_MANY_STREAMS: a place
	// frees when one of the owner's own streams ends.
	streamsRetryAfter = 5 * time.Second
)

// Codes of the per-owner shares (see apitypes).
const (
	CodeTooManyRequests = apitypes.CodeTooManyRequests
	CodeTooManyStreams  = apitypes.CodeTooManyStreams
)

// ownerCaps counts what each owner holds of a server: requests in
// progress and streams open. A request holds a request place while it is
// served; a stream gives it back for a stream place when it starts, so
// the two shares are apart. The daemon's own OS user on the socket is not
// counted, as with max_conns: the operator always gets in.
type ownerCaps struct {
	maxRequests, maxStreams int

	mu       sync.Mutex
	requests map[string]int
	streams  map[string]int
}

func newOwnerCaps(l HTTPLimits) *ownerCaps {
	l = l.WithDefaults()
	return &ownerCaps{maxRequests: l.MaxRequestsPerOwner, maxStreams: l.MaxStreamsPerOwner,
		requests: map[string]int{}, streams: map[string]int{}}
}

// take counts one more of owner in held if it stays within limit, and
// returns how many the owner held before.
func (c *ownerCaps) take(held map[string]int, owner string, limit int) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := held[owner]
	if n >= limit {
		return n, false
	}
	held[owner] = n + 1
	return n, true
}

func (c *ownerCaps) give(held map[string]int, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held[owner]--; held[owner] <= 0 {
		delete(held, owner)
	}
}

// held returns what owner holds now: requests and streams.
func (c *ownerCaps) held(owner string) (requests, streams int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[owner], c.streams[owner]
}

// ownerSlot is what one request holds of its owner's shares. It is used
// by the request's own goroutine only.
type ownerSlot struct {
	caps   *ownerCaps
	owner  string
	stream bool // holds a stream place instead of a request place
}

type slotKey struct{}

// admitRequest takes a request place for the request's owner, or answers
// 429 E_TOO_MANY_REQUESTS. release gives back whatever the request holds
// when it ends.
func (s *Server) admitRequest(w http.ResponseWriter, r *http.Request, id *Identity) (*http.Request, func(), bool) {
	if id.Local && id.UID == s.adminUID {
		return r, func() {}, true
	}
	n, ok := s.caps.take(s.caps.requests, id.Owner, s.caps.maxRequests)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(requestsRetryAfter/time.Second)))
		refuseUnread(w, r, http.StatusTooManyRequests, &engine.Error{Code: CodeTooManyRequests, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%s already has %d requests in progress, the most one owner may have (http.max_requests_per_owner); try again when some have finished", id.Owner, n)})
		return r, nil, false
	}
	slot := &ownerSlot{caps: s.caps, owner: id.Owner}
	release := func() {
		if slot.stream {
			slot.caps.give(slot.caps.streams, slot.owner)
		} else {
			slot.caps.give(slot.caps.requests, slot.owner)
		}
	}
	return r.WithContext(context.WithValue(r.Context(), slotKey{}, slot)), release, true
}

// holdStream turns the request's place into a stream place, before a
// handler holds its response open (a stream, a long-poll wait), or
// answers 429 E_TOO_MANY_STREAMS. A request with no place (the daemon's
// own user, a handler served without ServeHTTP) is not counted.
func (s *Server) holdStream(w http.ResponseWriter, r *http.Request) bool {
	slot, _ := r.Context().Value(slotKey{}).(*ownerSlot)
	if slot == nil || slot.stream {
		return true
	}
	n, ok := slot.caps.take(slot.caps.streams, slot.owner, slot.caps.maxStreams)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(streamsRetryAfter/time.Second)))
		writeErr(w, http.StatusTooManyRequests, &engine.Error{Code: CodeTooManyStreams, Class: engine.ClassProtocol,
			Message: fmt.Sprintf("%s already has %d streams and waits open, the most one owner may have (http.max_streams_per_owner); try again when one has ended", slot.owner, n)})
		return false
	}
	slot.caps.give(slot.caps.requests, slot.owner)
	slot.stream = true
	return true
}
