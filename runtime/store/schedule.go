package store

import (
	"encoding/json"
	"time"
)

// Schedule is one schedule of an owner: a flow started on the ticks of a
// cron expression or a period (package internal/tick computes
// them). Next is stored, never recomputed from the time a daemon starts,
// so a tick is fired or skipped once whatever restarts in between; the
// firing itself is an accepted run whose request id the tick derives
// (DESIGN §12).
type Schedule struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
	Flow  string `json:"flow"`
	// Cron in Zone, or Every: exactly one is set.
	Cron  string        `json:"cron,omitempty"`
	Every time.Duration `json:"every,omitempty"`
	Zone  string        `json:"zone,omitempty"`
	// Input is each firing's input (nil: none), unless InputFn names the
	// parameter of the schedule's declaration that computes it from the
	// tick, evaluated from the sources SourceHash names.
	Input      json.RawMessage `json:"input,omitempty"`
	InputFn    string          `json:"input_fn,omitempty"`
	SourceHash string          `json:"source_hash,omitempty"`
	// Overlap and CatchUp are the schedule's policies ("skip", "queue",
	// "allow"; "none", "latest", "all"), MaxCatchUp the bound of "all".
	Overlap    string `json:"overlap,omitempty"`
	CatchUp    string `json:"catch_up,omitempty"`
	MaxCatchUp int    `json:"max_catch_up,omitempty"`
	// Next is the first tick not yet fired or skipped.
	Next time.Time `json:"next"`
	// Paused stops firing until resumed; ticks due meanwhile are the
	// catch-up policy's when it resumes.
	Paused      bool   `json:"paused,omitempty"`
	PausedBy    string `json:"paused_by,omitempty"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Revision grows with every write of the record: the schedule
	// service saves a pass only over the revision it read, so a schedule
	// registered again, paused or resumed meanwhile keeps what its owner
	// wrote.
	Revision uint64 `json:"revision"`
	// Source is where the schedule was declared (file:line).
	Source string `json:"source,omitempty"`
	// Firings are the latest firings, newest last (at most MaxFirings).
	Firings   []ScheduleFiring `json:"firings,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// MaxFirings bounds Schedule.Firings.
const MaxFirings = 10

// ScheduleFiring is one tick a schedule fired or skipped.
type ScheduleFiring struct {
	Tick  time.Time `json:"tick"`
	RunID string    `json:"run_id,omitempty"`
	// Skipped says why the tick started no run (its overlap or catch-up
	// policy, or a refusal at admission).
	Skipped string    `json:"skipped,omitempty"`
	At      time.Time `json:"at"`
}

// ScheduleListParams selects schedules: one owner's (Owner "" for all),
// in (owner, name) order, at most Limit (0: all).
type ScheduleListParams struct {
	Owner string
	Limit int
}

// ScheduleTx is the part of Tx that keeps schedules.
type ScheduleTx interface {
	// SchedulePut inserts or replaces the schedule (Owner, Name).
	SchedulePut(s *Schedule) error
	ScheduleGet(owner, name string) (*Schedule, error)
	// ScheduleDelete removes a schedule (ErrNotFound if missing).
	ScheduleDelete(owner, name string) error
	ScheduleList(p ScheduleListParams) ([]*Schedule, error)
	// ScheduleListDue returns the schedules not paused whose Next is at or
	// before now, the earliest Next first, at most limit (0: all): an
	// index walk that stops at the first schedule not yet due.
	ScheduleListDue(now time.Time, limit int) ([]*Schedule, error)
}

// CheckSchedule refuses a schedule the store cannot key.
func CheckSchedule(s *Schedule) error {
	if err := CheckID("schedule owner", s.Owner); err != nil {
		return err
	}
	return CheckID("schedule name", s.Name)
}
