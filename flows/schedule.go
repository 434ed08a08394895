package flows

import (
	"encoding/json"
	"time"

	"github.com/weirhq/weir/internal/tick"
)

// Schedule is a schedule() declaration of a flow file: start Flow on the
// ticks of a cron expression in a zone, or of a fixed period. It is
// declared beside flows, not inside one, and the module carries it so that
// registration can check it and the engine can keep it (DESIGN §12: a
// firing is an accepted run whose request id the tick derives).
type Schedule struct {
	// Name names the schedule among its owner's; the same rule as flow
	// names.
	Name string
	// Flow is the flow each tick starts.
	Flow string
	// Cron is a five-field cron expression (or @daily and the other
	// descriptors) read in Zone; Every is a period counted from the Unix
	// epoch. Exactly one is set.
	Cron  string
	Every time.Duration
	// Zone is the IANA zone Cron is read in; "" is UTC.
	Zone string
	// Input is each firing's input when it is a constant (JSON); InputFn
	// computes it from the tick instead: input(tick), where tick is
	// {"time": RFC 3339 in Zone, "schedule": Name}. Neither: the input is {}.
	Input   json.RawMessage
	InputFn *CallableRef
	// Overlap is what a tick does while the run of an earlier one is not
	// terminal: OverlapSkip, OverlapQueue or OverlapAllow.
	Overlap string
	// CatchUp is which ticks missed while no daemon fired them still fire
	// ("none", "latest", "all": tick.CatchUp), MaxCatchUp how many "all"
	// fires at most.
	CatchUp    string
	MaxCatchUp int
	// Doc describes the schedule.
	Doc string
	// SourceHash identifies the sources that declare the schedule (see
	// Module.DeclSources); an evaluator built from them evaluates InputFn.
	SourceHash string
	// Pos is the position of the schedule() call.
	Pos Pos
	// Site is where the call writes its arguments, for diagnostics only
	// (nil once decoded).
	Site CallSite
}

// What a tick does while the previous firing's run is still going
// (Schedule.Overlap).
const (
	// OverlapSkip starts nothing; the tick is recorded as skipped.
	OverlapSkip = "skip"
	// OverlapQueue starts the run once the previous one is terminal.
	OverlapQueue = "queue"
	// OverlapAllow starts the run anyway.
	OverlapAllow = "allow"
)

// Overlaps lists the overlap policies, in documentation order.
var Overlaps = []string{OverlapSkip, OverlapQueue, OverlapAllow}

// CatchUps lists the catch-up policies, in documentation order.
var CatchUps = []string{string(tick.CatchUpNone), string(tick.CatchUpLatest), string(tick.CatchUpAll)}

// Schedule defaults and bounds: a schedule that says nothing neither
// overlaps its own runs nor fires what it missed.
const (
	DefaultOverlap    = OverlapSkip
	DefaultCatchUp    = string(tick.CatchUpNone)
	DefaultMaxCatchUp = 10
	// MaxMaxCatchUp bounds max_catch_up: a catch-up is a burst of runs
	// admitted at once.
	MaxMaxCatchUp = 100
)

// DeclSchedule is the prefix of a schedule's CallableRef.Decl.
const DeclSchedule = "schedule:"

// Decl is what the schedule's callable refs carry in CallableRef.Decl.
func (s *Schedule) Decl() string { return DeclSchedule + s.Name }

// Spec parses the schedule's cron or period, as registration checked it.
func (s *Schedule) Spec() (*tick.Spec, error) { return tick.Parse(s.Cron, s.Every, s.Zone) }

// ArgPos is the position of the named keyword argument of the schedule()
// call, or of the call.
func (s *Schedule) ArgPos(param string) Pos {
	if s.Site != nil {
		return s.Site.ArgPos(param)
	}
	return s.Pos
}

type scheduleJSON struct {
	Name       string          `json:"name"`
	Flow       string          `json:"flow"`
	Cron       string          `json:"cron,omitempty"`
	Every      jsonDuration    `json:"every,omitempty"`
	Zone       string          `json:"zone,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	InputFn    *CallableRef    `json:"input_fn,omitempty"`
	Overlap    string          `json:"overlap"`
	CatchUp    string          `json:"catch_up"`
	MaxCatchUp int             `json:"max_catch_up"`
	Doc        string          `json:"doc,omitempty"`
	SourceHash string          `json:"source_hash"`
	Pos        Pos             `json:"pos"`
}

// MarshalJSON encodes the schedule (durations as strings, as the IR's).
func (s *Schedule) MarshalJSON() ([]byte, error) {
	return json.Marshal(scheduleJSON{
		Name: s.Name, Flow: s.Flow, Cron: s.Cron, Every: jsonDuration(s.Every), Zone: s.Zone,
		Input: s.Input, InputFn: s.InputFn, Overlap: s.Overlap, CatchUp: s.CatchUp, MaxCatchUp: s.MaxCatchUp,
		Doc: s.Doc, SourceHash: s.SourceHash, Pos: s.Pos,
	})
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	var j scheduleJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Schedule{
		Name: j.Name, Flow: j.Flow, Cron: j.Cron, Every: time.Duration(j.Every), Zone: j.Zone,
		Input: j.Input, InputFn: j.InputFn, Overlap: j.Overlap, CatchUp: j.CatchUp, MaxCatchUp: j.MaxCatchUp,
		Doc: j.Doc, SourceHash: j.SourceHash, Pos: j.Pos,
	}
	return nil
}
