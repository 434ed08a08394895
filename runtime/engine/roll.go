package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/engine/internal/dispatcher"
	"github.com/weirhq/weir/runtime/store"
)

// A fleet agrees on its plugins (docs/design.md §10). Each engine on a
// shared store that keeps a roll (store.Roll) writes its entry there, the
// tools it serves with their plugins' checksums, at start, when its tools
// change (ReportTools) and on the scheduler's tick, which renews the
// entry's liveness stamp; Stop takes it out. Registration reads the roll
// and warns of a flow whose tools a live daemon lacks or has from another
// binary. Dispatch needs no roll: an engine takes no task of a run whose
// flow calls a tool it does not serve (withheldTools), so another daemon
// takes it; the roll only says whether any live daemon can.

// ToolPinner is an optional ability of Config.Tools: the tools served now,
// each with the SHA-256 of the plugin binary that declares it (the plugin
// host has it). An engine whose Tools lack it writes no roll entry.
type ToolPinner interface {
	ToolPins() map[string]string
}

// DaemonStaleLeases is the staleness limit of the roll, in lease timeouts:
// an entry whose stamp is older than DaemonStaleLeases × LeaseTimeout
// (60 s by default) is a departed daemon's. It counts for nothing and the
// next stamping daemon deletes it. Entries are renewed every third of a
// lease timeout, so a live daemon misses five renewals before it looks
// departed.
const DaemonStaleLeases = 2

// CodeFleetTools is the warning a registration on a fleet answers with for
// each tool of the flows registered that a live daemon lacks or serves
// from another plugin binary.
const CodeFleetTools flows.Code = "W_FLEET_TOOLS"

// evWithheld: no live daemon of the fleet serves every tool the run's flow
// calls, so its work waits in the queue (until its queue deadline).
const evWithheld = "withheld"

// MaxWithheldScan bounds how many withheld tasks one dispatch call looks
// past to find work this engine serves the tools of: a daemon that lacks
// a tool sees at most this many of other daemons' tasks ahead of its own
// per wake-up.
const MaxWithheldScan = dispatcher.MaxWithheldScan

// maxWithheldNoted bounds the runs an engine remembers having written a
// withheld event for; past it the memory is cleared (an event may then be
// written again).
const maxWithheldNoted = 10000

// fleetRoll is this engine's part in the fleet's roll (docs/design.md
// §10): its own entry, the live entries it last read, and what it
// withholds from dispatch for lack of a tool.
type fleetRoll struct {
	e *Engine
	// stamped is when this engine last wrote its entry (unix
	// nanoseconds); live, the live entries it last read.
	stamped atomic.Int64
	live    atomic.Pointer[[]*store.Daemon]
}

// rolling reports whether this engine keeps a roll entry.
func (r *fleetRoll) rolling() bool {
	e := r.e
	if !e.st.Capabilities().Shared {
		return false
	}
	_, ok := e.tools.(ToolPinner)
	return ok
}

// stale is the staleness limit of roll entries.
func (r *fleetRoll) stale() time.Duration {
	e := r.e
	return DaemonStaleLeases * e.cfg.Load().LeaseTimeout
}

// ReportTools writes this engine's roll entry now, with the tools served
// now: the daemon calls it after its plugins were rescanned or its config
// reloaded. On a store without a roll it does nothing.
func (e *Engine) ReportTools(ctx context.Context) error {
	if !e.roll.rolling() {
		return nil
	}
	now := e.clock.Now()
	pins := e.tools.(ToolPinner).ToolPins()
	self := &store.Daemon{ID: e.holder, PID: os.Getpid(), Tools: pins,
		StartedAt: time.Unix(0, e.startedAt.Load()).UTC(), SeenAt: now}
	self.Host, _ = os.Hostname()
	err := e.st.Update(ctx, func(tx store.Tx) error {
		r, ok := baseTx(tx).(store.Roll)
		if !ok {
			return errNoRoll
		}
		return r.DaemonPut(self)
	})
	if errors.Is(err, errNoRoll) {
		return nil
	}
	if err != nil {
		return err
	}
	e.roll.stamped.Store(now.UnixNano())
	e.held.servedPins(pins) // served tools changed: decide each withheld run again
	return e.roll.read(ctx)
}

var errNoRoll = errors.New("engine: the store keeps no roll")

// read keeps the live entries of the roll for dispatch to consult, and
// deletes the stale ones.
func (r *fleetRoll) read(ctx context.Context) error {
	e := r.e
	var all []*store.Daemon
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		all, err = baseTx(tx).(store.Roll).DaemonList()
		return err
	}); err != nil {
		return err
	}
	live, stale := splitRoll(all, e.clock.Now(), r.stale())
	r.live.Store(&live)
	if len(stale) == 0 {
		return nil
	}
	return e.st.Update(ctx, func(tx store.Tx) error {
		// Read again: a daemon may have come back since.
		all, err := baseTx(tx).(store.Roll).DaemonList()
		if err != nil {
			return err
		}
		_, stale := splitRoll(all, e.clock.Now(), r.stale())
		for _, d := range stale {
			if err := baseTx(tx).(store.Roll).DaemonDelete(d.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// departed reports whether d's stamp is older than the staleness limit.
func departed(d *store.Daemon, now time.Time, stale time.Duration) bool {
	return now.Sub(d.SeenAt) > stale
}

// splitRoll sorts a roll's entries into live and stale ones.
func splitRoll(all []*store.Daemon, now time.Time, stale time.Duration) (live, gone []*store.Daemon) {
	for _, d := range all {
		if departed(d, now, stale) {
			gone = append(gone, d)
		} else {
			live = append(live, d)
		}
	}
	return live, gone
}

// rollHost is the engine's side of the roll keeper (internal/rollkeeper).
type rollHost struct{ e *Engine }

// StampedAt is when this engine's roll entry was last written.
func (h rollHost) StampedAt() time.Time { return time.Unix(0, h.e.roll.stamped.Load()) }

// StampRoll writes this engine's roll entry again.
func (h rollHost) StampRoll(ctx context.Context) error { return h.e.ReportTools(ctx) }

// LeaseTimeout is the lease deadline now in force.
func (h rollHost) LeaseTimeout() time.Duration { return h.e.cfg.Load().LeaseTimeout }

// Tick is the scheduler's tick.
func (h rollHost) Tick() time.Duration { return h.e.cfg.Load().Tick }

// Error logs a failed pass.
func (h rollHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }

// leave takes this engine's entry out of the roll as it stops.
func (r *fleetRoll) leave(ctx context.Context) {
	e := r.e
	if !r.rolling() {
		return
	}
	err := e.st.Update(ctx, func(tx store.Tx) error {
		r, ok := baseTx(tx).(store.Roll)
		if !ok {
			return nil
		}
		return r.DaemonDelete(e.holder)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Error("leaving the fleet's roll", "error", err)
	}
}

// warnings reads the roll and warns of every tool of the flows just
// registered that a live daemon other than this one lacks, or serves from
// another plugin binary than this one (which registered them, so serves
// them all). Nothing is refused: a fleet mid-upgrade differs for a while.
func (r *fleetRoll) warnings(ctx context.Context, fs []*flows.Flow) (flows.Diagnostics, error) {
	e := r.e
	if !r.rolling() {
		return nil, nil
	}
	var all []*store.Daemon
	if err := e.st.View(ctx, func(tx store.Tx) error {
		r, ok := baseTx(tx).(store.Roll)
		if !ok {
			return nil
		}
		var err error
		all, err = r.DaemonList()
		return err
	}); err != nil {
		return nil, err
	}
	live, _ := splitRoll(all, e.clock.Now(), r.stale())
	return rollWarnings(e.holder, e.tools.(ToolPinner).ToolPins(), live, fs), nil
}

// rollWarnings is the decision of warnings: one warning per place a
// flow names a tool that some live daemon other than self lacks or serves
// at another checksum than pins says, naming those daemons.
func rollWarnings(self string, pins map[string]string, live []*store.Daemon, fs []*flows.Flow) flows.Diagnostics {
	var ds flows.Diagnostics
	for _, f := range fs {
		for _, u := range f.ToolUses() {
			var lack, differ []string
			for _, d := range live {
				if d.ID == self {
					continue
				}
				sum, ok := d.Tools[u.Tool]
				switch {
				case !ok:
					lack = append(lack, daemonName(d))
				case sum != pins[u.Tool]:
					differ = append(differ, fmt.Sprintf("%s (plugin %s)", daemonName(d), short12(sum)))
				}
			}
			var msg []string
			if len(lack) > 0 {
				msg = append(msg, fmt.Sprintf("daemon %s of the fleet does not serve it: its runs are not dispatched there", strings.Join(lack, ", ")))
			}
			if len(differ) > 0 {
				msg = append(msg, fmt.Sprintf("daemon %s serves it from another plugin binary than this daemon (plugin %s): its calls may behave differently there",
					strings.Join(differ, ", "), short12(pins[u.Tool])))
			}
			if len(msg) > 0 {
				ds = append(ds, flows.Diagnostic{Pos: u.Pos, Code: CodeFleetTools, Severity: flows.SeverityWarning,
					Message: fmt.Sprintf("%s %q of flow %q: tool %q: %s", u.Node.Kind, u.Node.ID, f.Name, u.Tool, strings.Join(msg, "; "))})
			}
		}
	}
	return ds
}

// daemonName names a roll entry for people: its id, host and pid.
func daemonName(d *store.Daemon) string {
	if d.Host == "" {
		return d.ID
	}
	return fmt.Sprintf("%s (%s pid %d)", d.ID, d.Host, d.PID)
}

func short12(sum string) string {
	if sum == "" {
		return "unpinned"
	}
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// withheldTools lists the tools the flow of run calls that this engine does
// not serve (none on a store only this engine uses: there, a tool removed
// since registration fails the call that needs it, as it always did). A
// run with such tools is left to a daemon that serves them all: a step
// runs on from node to node within its lease, so the whole run goes where
// every tool of its flow is.
func (r *fleetRoll) withheldTools(ctx context.Context, run *store.Run) []string {
	e := r.e
	if !e.st.Capabilities().Shared {
		return nil
	}
	fe, err := e.book.version(ctx, run.Flow, run.Version)
	if err != nil {
		return nil // the step reports it
	}
	var missing []string
	for _, u := range fe.flow.ToolUses() {
		if _, ok := e.tools.LookupTool(u.Tool); !ok && !slices.Contains(missing, u.Tool) {
			missing = append(missing, u.Tool)
		}
	}
	sort.Strings(missing)
	return missing
}

// noteWithheld writes a withheld event on the run, once per run and
// engine, when no live daemon of the roll serves every tool missing here:
// the run then waits, and says why, instead of failing or hanging silently.
func (r *fleetRoll) noteWithheld(ctx context.Context, t *store.Task, w *withheldRun) {
	e := r.e
	if p := r.live.Load(); p != nil {
		for _, d := range *p {
			if d.ID != e.holder && servesAll(d, w.missing) {
				return // another daemon takes it
			}
		}
	}
	if e.held.noteOnce(w) {
		return
	}
	err := e.st.Update(ctx, func(tx store.Tx) error {
		return appendEvent(tx, t.RunID, evWithheld, t.Attempt, t.Node, map[string]any{
			"tools":  w.missing,
			"holder": e.holder,
			"reason": fmt.Sprintf("no live daemon of the fleet serves %s: the run waits for one (until its queue deadline)", strings.Join(w.missing, ", ")),
		}, e.clock.Now())
	})
	if err != nil {
		e.log.Error("recording a withheld run", "run", t.RunID, "error", err)
	}
	e.log.Warn("run withheld: no live daemon serves its tools", "run", t.RunID, "tools", strings.Join(w.missing, ","))
}

func servesAll(d *store.Daemon, tools []string) bool {
	for _, t := range tools {
		if _, ok := d.Tools[t]; !ok {
			return false
		}
	}
	return true
}
