package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace id of a run started without a caller's trace: the
// first 16 bytes of a hash of its run id, never all zero (W3C: invalid).
func TraceID(runID string) trace.TraceID {
	sum := sha256.Sum256([]byte("weir/trace\x00" + runID))
	var id trace.TraceID
	copy(id[:], sum[:16])
	if !id.IsValid() {
		id[15] = 1
	}
	return id
}

// TraceOf is the trace id of run runID started with traceparent: the
// caller's, from the W3C traceparent (journaled at acceptance), else its
// own (TraceID). A malformed traceparent is ignored, as the W3C spec says.
func TraceOf(runID, traceparent string) trace.TraceID {
	tid, _ := callerTrace(runID, traceparent)
	return tid
}

// callerTrace is the trace of run runID and its root's parent: the
// caller's trace and span from traceparent, else the run's own trace and
// no parent.
func callerTrace(runID, traceparent string) (trace.TraceID, trace.SpanID) {
	if tid, sid, ok := traceParent(traceparent); ok {
		return tid, sid
	}
	return TraceID(runID), trace.SpanID{}
}

// SpanKey is what the journal says a span is. The zero key but for Run is
// the run's root span.
type SpanKey struct {
	Run     string
	Node    string
	Visit   int
	Attempt int
	// Call names a part of a visit: "wait:ID" for a wait, later a tool
	// call's or a model turn's number.
	Call string
	// Seg tells apart spans the timeline opens more than once for the
	// same visit and attempt (a redrive that kept the attempt); 0 for the
	// first.
	Seg int
}

// SpanID is the span id of key: the first 8 bytes of a hash of its parts,
// never all zero. The same journal gives the same ids in every process.
func SpanID(key SpanKey) trace.SpanID {
	parts := []string{"weir/span", key.Run, key.Node, strconv.Itoa(key.Visit), strconv.Itoa(key.Attempt), key.Call, strconv.Itoa(key.Seg)}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	var id trace.SpanID
	copy(id[:], sum[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// traceParent reads a W3C traceparent ("00-TRACEID-SPANID-FLAGS"). It is
// the seam for a caller's trace journaled at acceptance: the accepted
// event's "traceparent" detail, once the API journals one, makes the
// caller's trace the run's and the caller's span the root's parent. A
// malformed one is ignored, as the W3C spec says, and the run keeps its
// own trace.
func traceParent(s string) (trace.TraceID, trace.SpanID, bool) {
	var tid trace.TraceID
	var sid trace.SpanID
	p := strings.Split(s, "-")
	if len(p) != 4 || len(p[0]) != 2 || p[0] == "ff" || len(p[1]) != 32 || len(p[2]) != 16 || len(p[3]) != 2 {
		return tid, sid, false
	}
	if _, err := hex.Decode(tid[:], []byte(p[1])); err != nil {
		return tid, sid, false
	}
	if _, err := hex.Decode(sid[:], []byte(p[2])); err != nil {
		return tid, sid, false
	}
	if strings.ToLower(s) != s || !tid.IsValid() || !sid.IsValid() {
		return tid, sid, false
	}
	return tid, sid, true
}

// CallParent is the W3C traceparent a node visit's calls carry to their
// plugins (and the plugins on to what they call): trace tid, the visit's
// span (key: Run, Node, Visit, Attempt; the id Build gives that span) as
// the parent, sampled when the run's trace is exported. A plugin's own
// spans so join the run's trace under the node that called it.
func CallParent(tid trace.TraceID, key SpanKey, sampled bool) string {
	// The caller's tracestate goes with it unchanged: weir adds no member.
	flags := trace.TraceFlags(0)
	if sampled {
		flags = trace.FlagsSampled
	}
	sid := SpanID(key)
	return "00-" + tid.String() + "-" + sid.String() + "-" + flags.String()
}

// RunTraceID is the trace id a run's record holds (store.Run.TraceID, hex),
// else its own (TraceID) for a run accepted before runs held one.
func RunTraceID(runID, hexID string) trace.TraceID {
	if tid, err := trace.TraceIDFromHex(hexID); err == nil {
		return tid
	}
	return TraceID(runID)
}

// MaxTraceState bounds the tracestate a run keeps: the 512 characters the
// W3C spec asks every vendor to pass on.
const MaxTraceState = 512

// BoundTraceState is s within MaxTraceState: its last (least recently
// updated) members dropped until it fits, as the W3C spec allows.
func BoundTraceState(s trace.TraceState) string {
	for s.Len() > 0 && len(s.String()) > MaxTraceState {
		var last string
		s.Walk(func(k, _ string) bool { last = k; return true })
		s = s.Delete(last)
	}
	return s.String()
}

// ParseTraceState is a journaled tracestate; malformed, none.
func ParseTraceState(s string) trace.TraceState {
	ts, err := trace.ParseTraceState(s)
	if err != nil {
		return trace.TraceState{}
	}
	return ts
}
