package flows

import (
	"regexp"
	"strings"
)

// Trigger is an on_event() declaration of a flow file: start Flow for
// each accepted event named Event. The engine derives the run's request
// id from the event's id and the trigger's Name (event:ID:NAME, DESIGN
// §12), so Name must stay the same across registrations for a re-sent
// event to start nothing new.
type Trigger struct {
	// Name names the trigger among its owner's: the script's name, or
	// DefaultTriggerName(Event, Flow).
	Name string `json:"name"`
	// Event is the name of the events that start a run (ValidEventName).
	Event string `json:"event"`
	// Flow is the flow each event starts.
	Flow string `json:"flow"`
	// Input computes the run's input from the event: input(ev), where ev
	// is {"name", "id", "key", "payload"}. Nil: the input is the event's
	// payload.
	Input *CallableRef `json:"input,omitempty"`
	// Filter decides whether an event starts a run: filter(ev), truthy
	// starts it. Nil: every event does.
	Filter *CallableRef `json:"filter,omitempty"`
	// Doc describes the trigger.
	Doc string `json:"doc,omitempty"`
	// SourceHash identifies the sources that declare the trigger (see
	// Module.DeclSources).
	SourceHash string `json:"source_hash"`
	// Pos is the position of the on_event() call.
	Pos Pos `json:"pos"`
	// Site is where the call writes its arguments, for diagnostics only
	// (nil once decoded).
	Site CallSite `json:"-"`
}

// DeclTrigger is the prefix of a trigger's CallableRef.Decl.
const DeclTrigger = "trigger:"

// Decl is what the trigger's callable refs carry in CallableRef.Decl.
func (t *Trigger) Decl() string { return DeclTrigger + t.Name }

// ArgPos is the position of the named keyword argument of the on_event()
// call, or of the call.
func (t *Trigger) ArgPos(param string) Pos {
	if t.Site != nil {
		return t.Site.ArgPos(param)
	}
	return t.Pos
}

// MaxEventNameBytes bounds an event's name.
const MaxEventNameBytes = 128

var eventNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$`)

// ValidEventName reports whether s can name an event: dot-separated
// lower-case identifiers ("ticket.created"), at most MaxEventNameBytes.
func ValidEventName(s string) bool {
	return len(s) <= MaxEventNameBytes && eventNameRE.MatchString(s)
}

// DefaultTriggerName is a trigger's name when its declaration gives none:
// FLOW_on_EVENT with the event's dots as underscores ("triage_on_ticket_created").
// It depends only on what the declaration says, so it is stable across
// registrations.
func DefaultTriggerName(event, flow string) string {
	return flow + "_on_" + strings.ReplaceAll(event, ".", "_")
}
