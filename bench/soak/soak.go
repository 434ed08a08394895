package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/bench/internal/daemon"
	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// Config is one soak.
type Config struct {
	// Weir is the weir binary; Plugins a pinned plugins directory holding
	// testkit, mail and notes.
	Weir, Plugins string
	// Duration bounds the chaos phase (kills and restarts); recovery,
	// draining and the checks come after it, bounded by Drain.
	Duration time.Duration
	// Drain is the least time the final drain may take before it gives up
	// on runs still unfinished; the bound grows with the backlog it
	// measures when it begins (PerRun for each unfinished run).
	Drain  time.Duration
	PerRun time.Duration
	// Quiet ends the drain early when nothing moved for that long: no run
	// changed phase, attempt or record and no tool call ended. Every run
	// still unfinished then is stuck.
	Quiet time.Duration
	// Failpoint is armed in every daemon besides the chaos failpoints
	// (tests arm drop-accepted to prove "none lost" can fail).
	Failpoint string
	// Seed drives every random choice of the workload and the kills.
	Seed uint64
	// Data is the daemon's data directory (kept across restarts); in a
	// fleet, it holds one data directory per daemon.
	Data string
	// Fleet, when 2 or more, runs that many daemons sharing the PostgreSQL
	// schema of Store; 0 runs one daemon on its own Badger store.
	Fleet int
	// Store is the fleet's store URL, its search_path naming the schema.
	Store string
	// Log receives progress lines; Out the invariant lines and the verdict.
	Log, Out io.Writer
}

// failpoints are runtime/internal/failpoint's killing failpoints, one per
// durable boundary; the soak arms each in turn, then at random.
var failpoints = []string{"after-accept", "after-started", "after-tool", "after-result", "mid-finish", "exhausted-parked", "after-redrive",
	"schedule-decided", "schedule-fired", "event-accepted", "event-triggered", "fork-read", "after-fork"}

// Report is the outcome of a soak.
type Report struct {
	Passed, Failed int
	// Daemons started, runs accepted, and kills by cause (a failpoint's
	// name, or "random").
	Daemons  int
	Accepted int
	Kills    map[string]int
	// Drain says how the final drain went; Invariants holds the verdict
	// line of each invariant, by name.
	Drain      drainReport
	Invariants map[string]bool
}

// submission is one business request of the client: a request id, the
// input first sent with it, and the run it turned into once an answer said
// so.
type submission struct {
	reqID string
	kind  *kind
	input map[string]any
	runID string
	// created counts the answers that said a new run was made: one at
	// most. (Two re-sends of an unanswered request may be in flight at
	// once; the one that created the run may answer last.)
	created int
	cancel  []apitypes.CancelAnswer // answers to cancels of this run
	// approve: a run parked on a human wait that the approver is to
	// decide (some are left undecided on purpose); decided once it was.
	approve, decided bool
}

// world is what the client side knows, shared by the actors.
type world struct {
	cfg Config

	mu      sync.Mutex
	rng     *rand.Rand
	subs    []*submission
	byReq   map[string]*submission
	pending []*submission // sent, no answer yet: their fate is unknown
	next    int
	// waits are the runs of the approval kind the approver is to decide,
	// once their run id is known.
	waits []*submission
	// inline holds violations seen while the soak ran, by invariant.
	inline map[string][]string
	counts map[string]int
	// skips are the skipped firings of the soak's schedule the watcher
	// read.
	skips map[skipKey]bool
	// events are the events sent (events.go); forks the fork requests,
	// by request id (forks.go).
	events *eventsSent
	forks  map[string]*forkSent
	// dataDirs are the slots' data directories, whose plugin state the
	// resolver reads as a person would read a plugin's log.
	dataDirs []string
	// kills are the daemons' kills, in the order they ended.
	kills []killAt
}

func (w *world) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

func (w *world) violate(inv, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inline[inv] = append(w.inline[inv], fmt.Sprintf(format, args...))
}

func (w *world) count(name string) {
	w.mu.Lock()
	w.counts[name]++
	w.mu.Unlock()
}

// known returns a random submission whose run is known, or nil.
func (w *world) known() *submission {
	w.mu.Lock()
	defer w.mu.Unlock()
	for range 8 {
		if len(w.subs) == 0 {
			return nil
		}
		s := w.subs[w.rng.IntN(len(w.subs))]
		if s.runID != "" {
			return s
		}
	}
	return nil
}

// actor is something the soak does to the daemon while it runs, as often as
// every is long. Subflows, waits and cohorts bring their own (an approver
// that decides pending waits, for one).
type actor struct {
	name  string
	every time.Duration
	act   func(ctx context.Context, w *world, c *client.Client)
}

var actors = []actor{
	{"submit", 15 * time.Millisecond, submitNew},
	{"submit", 15 * time.Millisecond, submitNew},
	{"duplicate", 60 * time.Millisecond, submitDuplicate},
	{"cancel", 120 * time.Millisecond, cancelOne},
	{"approve", 500 * time.Millisecond, approveWaiting},
	{"redrive", 500 * time.Millisecond, redriveParked},
	{"skips", 500 * time.Millisecond, watchSkips},
	{"ping", 150 * time.Millisecond, sendPings},
	{"reply", 100 * time.Millisecond, sendReplies},
	{"fork", 300 * time.Millisecond, forkOne},
	{"resolve", 300 * time.Millisecond, resolveUnknown},
	{"steer", 200 * time.Millisecond, decideSteer},
	{"topup", 300 * time.Millisecond, raiseBudgets},
}

// redriveParked redrives the dead letters of the redrive kind, whose runs
// parked on their exhausted waits. A dead letter redriven in an answer a
// kill took is not dead any more (E_NOT_DEAD), and one whose run a cancel
// ended is refused (E_RUN_ENDED) or gone with it; one whose run is being
// resumed is refused E_NOT_WAITING and redriven at a later pass. Any
// other refusal breaks the redrive's contract.
func redriveParked(ctx context.Context, w *world, c *client.Client) {
	res, err := c.Redrive(ctx, apitypes.RedriveRequest{Flow: "soak_redrive", Reason: "soak"})
	if err != nil {
		return // the daemon is down or draining: the next pass tries again
	}
	for _, r := range res.Results {
		if r.Redriven {
			w.count("redriven")
			continue
		}
		switch code := r.Error.Code; code {
		case engine.CodeNotDead, engine.CodeRunEnded, engine.CodeNotWaiting, engine.CodeNotFound,
			engine.CodeQueueFull, engine.CodeOwnerQuota, engine.CodeDraining:
			w.count("redrive refused " + code)
		default:
			w.violate(invRedrive, "redriving %s of run %s: %s %s", r.TaskID, r.RunID, code, r.Error.Message)
		}
	}
}

// approveWaiting approves the runs of the approval kind that are to be
// decided and that the daemon lists as waiting, so approvals land on wait
// runs in proportion to them however long a backlog keeps them from their
// wait. A run listed waiting may have been decided in an answer a kill
// took (E_ALREADY_DECIDED) or moved on since (E_NOT_WAITING); any other
// answer of the API is a violation of the wait's contract.
func approveWaiting(ctx context.Context, w *world, c *client.Client) {
	waiting, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Phase: apitypes.PhaseWaiting}))
	if err != nil {
		return
	}
	w.mu.Lock()
	due := map[string]*submission{}
	for _, s := range w.waits {
		due[s.runID] = s
	}
	w.mu.Unlock()
	for _, v := range waiting {
		s := due[v.ID]
		if s == nil || ctx.Err() != nil {
			continue
		}
		payload, _ := json.Marshal(map[string]any{"by": "soak", "id": s.input["id"]})
		_, err := c.RunApprove(ctx, s.runID, "w", payload)
		switch code := client.ErrorCode(err); {
		case err == nil:
			w.count("approved")
			w.decided(s)
		case code == engine.CodeAlreadyDecided:
			w.count("approve refused " + code)
			w.decided(s)
		case code == engine.CodeNotWaiting:
			w.count("approve refused " + code)
		case code != "":
			w.violate(invCohort, "approving %s: %v", s.runID, err)
		}
	}
}

// decided takes s off the approver's list.
func (w *world) decided(s *submission) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.decided = true
	for i, o := range w.waits {
		if o == s {
			w.waits = append(w.waits[:i], w.waits[i+1:]...)
			return
		}
	}
}

// submitNew sends a new request id.
func submitNew(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	w.next++
	k := pickKind(w.rng)
	s := &submission{reqID: fmt.Sprintf("req-%05d", w.next), kind: k}
	s.input = k.input(w.rng, s.reqID)
	s.approve = k.mayWait && w.rng.IntN(10) < 9 // one in ten waits to the end
	w.subs = append(w.subs, s)
	w.byReq[s.reqID] = s
	w.mu.Unlock()
	w.send(ctx, c, s)
}

// send submits s with its own input and records what the answer says.
func (w *world) send(ctx context.Context, c *client.Client, s *submission) {
	in, _ := json.Marshal(s.input)
	res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: s.kind.flow, Input: in, RequestID: s.reqID})
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.counts["answered"]++
		if !res.Existing {
			if s.created++; s.created > 1 {
				w.inline[invDedup] = append(w.inline[invDedup], fmt.Sprintf("%s re-sent with its input answered a new run %s again", s.reqID, res.RunID))
			}
		}
		if s.runID == "" {
			if res.Existing && !w.isPending(s) {
				w.inline[invDedup] = append(w.inline[invDedup], fmt.Sprintf("%s sent for the first time answered an existing run %s", s.reqID, res.RunID))
			}
			s.runID = res.RunID
			w.removePending(s)
			if s.approve {
				w.waits = append(w.waits, s)
			}
			return
		}
		if res.RunID != s.runID {
			w.inline[invDedup] = append(w.inline[invDedup], fmt.Sprintf("%s answered run %s, earlier %s", s.reqID, res.RunID, s.runID))
		}
	case client.ErrorCode(err) != "":
		w.counts["refused "+client.ErrorCode(err)]++
		switch code := client.ErrorCode(err); {
		case s.runID == "" && (code == engine.CodeQueueFull || code == engine.CodeBadInput || code == engine.CodeUnknownFlow):
			w.removePending(s) // refused after the dedup lookup: no run holds this request id
		case s.runID != "":
			w.inline[invDedup] = append(w.inline[invDedup], fmt.Sprintf("%s re-sent with its input refused: %v", s.reqID, err))
		}
	default: // no answer: accepted or not, nobody knows yet
		w.counts["no answer"]++
		if s.runID == "" && !w.isPending(s) {
			w.pending = append(w.pending, s)
		}
	}
}

func (w *world) isPending(s *submission) bool {
	for _, p := range w.pending {
		if p == s {
			return true
		}
	}
	return false
}

func (w *world) removePending(s *submission) {
	for i, p := range w.pending {
		if p == s {
			w.pending = append(w.pending[:i], w.pending[i+1:]...)
			return
		}
	}
}

// submitDuplicate re-sends a request id: with its own input (the answer
// must be the same run, marked existing; if its first answer was lost,
// this is how the client learns its fate) or, for a run known to exist,
// with another input (which must be refused).
func submitDuplicate(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	var s *submission
	if len(w.pending) > 0 && w.rng.IntN(2) == 0 {
		s = w.pending[w.rng.IntN(len(w.pending))]
	}
	conflict := w.rng.IntN(3) == 0
	w.mu.Unlock()
	if s == nil {
		if s = w.known(); s == nil {
			return
		}
	}
	if !conflict || s.runID == "" {
		w.count("duplicate")
		w.send(ctx, c, s)
		return
	}
	other := map[string]any{}
	for k, v := range s.input {
		other[k] = v
	}
	other["id"] = s.reqID + "-other"
	in, _ := json.Marshal(other)
	res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: s.kind.flow, Input: in, RequestID: s.reqID})
	switch code := client.ErrorCode(err); {
	case err == nil:
		w.violate(invDedup, "%s re-sent with a different input was accepted as run %s (existing=%v)", s.reqID, res.RunID, res.Existing)
	case code == engine.CodeDedupConflict:
		w.count("conflict refused")
	case code != "":
		w.violate(invDedup, "%s re-sent with a different input answered %v, want %s", s.reqID, err, engine.CodeDedupConflict)
	}
}

// cancelOne cancels one of the latest runs (most likely still in flight)
// and keeps the answer.
func cancelOne(ctx context.Context, w *world, c *client.Client) {
	w.mu.Lock()
	var s *submission
	if n := len(w.subs); n > 0 {
		s = w.subs[n-1-w.rng.IntN(min(n, 30))]
	}
	w.mu.Unlock()
	if s == nil || s.runID == "" {
		return
	}
	a, err := c.RunCancel(ctx, s.runID)
	if err != nil {
		if client.ErrorCode(err) != "" {
			w.violate(invCancel, "cancel of %s: %v", s.runID, err)
		}
		return
	}
	w.mu.Lock()
	s.cancel = append(s.cancel, a)
	w.counts["cancel "+string(a)]++
	w.mu.Unlock()
}

// Run runs one soak: the chaos phase (epochs of a daemon under the mixed
// workload, each ended by a failpoint or a SIGKILL), then a clean daemon
// that recovers, drains and is checked against every invariant.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		byReq: map[string]*submission{}, inline: map[string][]string{}, counts: map[string]int{}, skips: map[skipKey]bool{}}
	rep := &Report{Kills: map[string]int{}}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 20 * time.Second
	}
	if cfg.PerRun <= 0 {
		cfg.PerRun = 25 * time.Millisecond
	}
	fmt.Fprintf(cfg.Log, "soak: seed %d, chaos for %v, data %s\n", cfg.Seed, cfg.Duration, cfg.Data)
	if cfg.Fleet > 0 {
		fmt.Fprintf(cfg.Log, "soak: a fleet of %d daemons on %s\n", cfg.Fleet, redactURL(cfg.Store))
	}
	model, err := startAgentModel()
	if err != nil {
		return nil, fmt.Errorf("the agents' model server: %w", err)
	}
	defer model.Close()

	// Every daemon is a slot (one, unless a fleet); a slot keeps its data
	// directory, and so its plugins' state, across the daemon's restarts.
	slots := max(cfg.Fleet, 1)
	slotDir := func(slot int) string {
		if cfg.Fleet == 0 {
			return cfg.Data
		}
		return slotData(cfg.Data, slot)
	}
	for slot := range slots {
		if err := os.MkdirAll(slotDir(slot), 0o700); err != nil {
			return nil, err
		}
		w.dataDirs = append(w.dataDirs, slotDir(slot))
	}
	var repMu sync.Mutex        // rep, written by every slot's chaos
	holders := map[string]int{} // a fleet's lease holders, by the slot of their daemon

	// start runs the daemon of slot with failpoint armed, and names it for
	// the log. A failpoint may fire while the daemon recovers, before it
	// serves: that is a kill like any other, reported as (nil, nil) after
	// counting it.
	start := func(slot int, failpoint string) (*daemon.Daemon, string, error) {
		repMu.Lock()
		rep.Daemons++
		who := fmt.Sprintf("daemon %d%s (%s)", rep.Daemons, slotName(cfg, slot), orNone(failpoint))
		repMu.Unlock()
		var env []string
		if fps := strings.Trim(failpoint+","+cfg.Failpoint, ","); fps != "" {
			env = []string{"WEIR_FAILPOINT=" + fps}
		}
		args := []string{"--config", model.config, "--log-level", "warn", "--grace", "2s"}
		if cfg.Fleet > 0 {
			// The holder is named in the "recovered" line, at info.
			env = append(env, "WEIR_STORE="+cfg.Store, "WEIR_STORE_SHARED=true")
			args = []string{"--config", model.config, "--log-level", "info", "--grace", "2s", "--lease-timeout", fleetLease.String()}
		}
		d, err := daemon.Start(daemon.Config{Weir: cfg.Weir, Plugins: cfg.Plugins, Data: slotDir(slot), Env: env, Args: args})
		var ee *daemon.ExitError
		if errors.As(err, &ee) && ee.SIGKILL && failpoint != "" {
			name := strings.Split(failpoint, "@")[0]
			repMu.Lock()
			rep.Kills[name]++
			repMu.Unlock()
			w.killed(slot)
			fmt.Fprintf(cfg.Log, "soak: %s killed by %s while recovering\n", who, name)
			return nil, who, nil
		}
		if err != nil {
			w.violate(invRestart, "%s did not start: %v", who, err)
			return nil, who, err
		}
		if cfg.Fleet > 0 {
			h := holderOf(d.Log())
			repMu.Lock()
			prev, dup := holders[h]
			if h != "" && !dup {
				holders[h] = slot
			}
			repMu.Unlock()
			switch {
			case h == "":
				w.violate(invHolders, "%s logged no holder at its start:\n%s", who, lastLines(d.Log(), 20))
			case dup:
				w.violate(invHolders, "%s leases as %s, the holder of a daemon of slot %d", who, h, prev)
			}
		}
		return d, who, nil
	}

	// Register the workload's flows and the schedule on a first daemon.
	d, _, err := start(0, "")
	if err != nil {
		return nil, err
	}
	var files []apitypes.SourceFile
	for _, k := range kinds {
		files = append(files, apitypes.SourceFile{Path: k.name + ".star", Src: k.src})
	}
	files = append(files, apitypes.SourceFile{Path: "tick.star", Src: tickSrc}, apitypes.SourceFile{Path: "ping.star", Src: pingSrc})
	if _, err := d.Client().FlowRegister(ctx, files...); err != nil {
		d.Kill()
		return nil, fmt.Errorf("registering the workload: %w", err)
	}
	if err := d.Kill(); err != nil {
		return nil, err
	}

	// Each slot's chaos: epochs of its daemon under its share of the
	// workload, each ended by a failpoint or a SIGKILL. A fleet's slots
	// die on their own, each as often as a lone daemon does over the
	// fleet's size, and send the workload's requests at that share of
	// its rate: the fleet as a whole kills and submits as a lone daemon's
	// soak does, spread over its daemons.
	chaosEnd := time.Now().Add(cfg.Duration)
	epochs := 0                // epochs begun by every slot, under repMu
	armed := map[string]bool{} // failpoints armed in turn by a slot now, under repMu
	scale := time.Duration(slots)
	// A lone daemon's failpoints in turn each get their whole epoch, past
	// the chaos's end if need be: on a slow machine the turns of every
	// failpoint may take longer than a short chaos, and one cut short
	// would be reported as never fired.
	inTurnLeft := func() bool {
		repMu.Lock()
		defer repMu.Unlock()
		return cfg.Fleet == 0 && epochs < len(failpoints)
	}
	chaos := func(slot int) error {
		for (time.Now().Before(chaosEnd) || inTurnLeft()) && ctx.Err() == nil {
			repMu.Lock()
			inTurn := nextInTurn(epochs, cfg.Fleet > 0, rep.Kills, armed)
			if inTurn != "" {
				armed[inTurn] = true
			}
			epochs++
			repMu.Unlock()
			left := time.Until(chaosEnd)
			fp, length := "", scale*time.Duration(300+w.intn(2700))*time.Millisecond
			switch {
			case inTurn != "":
				// Every failpoint in turn, early in its daemon's life, with
				// time to fire.
				fp, length = fmt.Sprintf("%s@%d", inTurn, 1+w.intn(4)), 15*time.Second
			case w.intn(5) < 2:
				fp = fmt.Sprintf("%s@%d", failpoints[w.intn(len(failpoints))], 1+w.intn(40))
			}
			if inTurn == "" {
				length = min(length, max(left, 500*time.Millisecond))
			}
			d, who, err := start(slot, fp)
			if err != nil {
				return nil // a violation already; the others go on
			}
			if d == nil {
				repMu.Lock()
				delete(armed, inTurn)
				repMu.Unlock()
				continue // its failpoint fired during recovery
			}
			ectx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			for _, a := range actors {
				wg.Go(func() {
					for {
						pause := time.Duration(1+w.intn(int(2*scale*a.every/time.Millisecond))) * time.Millisecond
						select {
						case <-ectx.Done():
							return
						case <-d.Exited():
							return
						case <-time.After(pause):
						}
						a.act(ectx, w, d.Client())
					}
				})
			}
			began := time.Now()
			cause := "random"
			select {
			case <-d.Exited():
				cause = strings.Split(fp, "@")[0]
			case <-time.After(length):
			case <-ctx.Done():
			}
			if err := d.Kill(); err != nil {
				cancel()
				wg.Wait()
				return err
			}
			cancel()
			wg.Wait()
			if cause != "random" && (fp == "" || !d.KilledBySIGKILL()) {
				w.violate(invRestart, "%s died by itself, not by a failpoint's SIGKILL; its last words:\n%s", who, lastLines(d.Log(), 40))
				cause = "crash"
			}
			repMu.Lock()
			rep.Kills[cause]++
			delete(armed, inTurn)
			repMu.Unlock()
			w.killed(slot)
			fmt.Fprintf(cfg.Log, "soak: %s killed by %s after %v\n", who, cause, time.Since(began).Round(time.Millisecond))
		}
		return nil
	}
	errs := make([]error, slots)
	var chaosWG sync.WaitGroup
	for slot := range slots {
		chaosWG.Go(func() { errs[slot] = chaos(slot) })
	}
	chaosWG.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Clean daemons recover, the schedule is paused so the drain waits for
	// runs that exist; the client learns the fate of every request
	// that got no answer by sending it again (to each daemon in turn),
	// and waits for every run to end. Any daemon answers for the fleet.
	ds := make([]*daemon.Daemon, slots)
	for slot := range ds {
		d, _, err := start(slot, "")
		if err != nil {
			return nil, err
		}
		defer d.Kill()
		ds[slot] = d
	}
	c := ds[0].Client()
	if err := pauseTicks(ctx, w, c); err != nil {
		return nil, err
	}
	if err := settleEvents(ctx, c); err != nil {
		return nil, err
	}
	for tries := 0; ; tries++ {
		w.mu.Lock()
		pending := append([]*submission(nil), w.pending...)
		w.mu.Unlock()
		if len(pending) == 0 {
			break
		}
		if tries == 20 {
			return nil, fmt.Errorf("%d requests still have no answer from a healthy daemon", len(pending))
		}
		for i, s := range pending {
			w.send(ctx, ds[i%slots].Client(), s)
		}
	}
	rep.Drain, err = drain(ctx, w, c, cfg)
	if err != nil {
		return nil, err
	}
	drained := time.Now()
	runs, err := client.Collect(c.RunListAll(ctx, client.RunListParams{}))
	if err != nil {
		return nil, err
	}
	fin, err := collect(ctx, w, c, runs)
	if err != nil {
		return nil, err
	}
	fin.drain = rep.Drain
	fin.chaos = cfg.Duration
	dirs := make([]string, slots)
	for slot, d := range ds {
		dirs[slot] = slotDir(slot)
		if err := d.Stop(10 * time.Second); err != nil {
			w.violate(invRestart, "the last daemon%s did not stop cleanly on SIGTERM: %v", slotName(cfg, slot), err)
		}
	}
	if fin.records, err = readRecords(dirs...); err != nil {
		return nil, err
	}
	fin.records.hostOf = holders
	fin.kills = rep.Kills
	fin.modelRequests, fin.modelBilled = model.srv.Requests(), model.srv.Billed()
	for _, s := range w.subs {
		if s.runID != "" {
			rep.Accepted++
		}
	}
	fmt.Fprintf(cfg.Log, "soak: %d daemons, %d requests, %d runs accepted; %s\n", rep.Daemons, len(w.subs), rep.Accepted, countsLine(w.counts))
	fmt.Fprintf(cfg.Log, "soak: %s; timelines read in %v\n", rep.Drain, time.Since(drained).Round(time.Millisecond))

	rep.Invariants = map[string]bool{}
	for _, inv := range invariantsOf(cfg) {
		bad := append(w.inline[inv.name], inv.check(w, fin)...)
		rep.Invariants[inv.name] = len(bad) == 0
		if len(bad) == 0 {
			rep.Passed++
			fmt.Fprintf(cfg.Out, "PASS %s: %s\n", inv.name, inv.summary(w, fin))
			if inv.name == invLost {
				for _, u := range unfinished(w, fin) {
					fmt.Fprintf(cfg.Out, "    unfinished within the drain bound, still moving: %s\n", u)
				}
			}
			continue
		}
		rep.Failed++
		fmt.Fprintf(cfg.Out, "FAIL %s: %d violation(s)\n", inv.name, len(bad))
		for i, b := range bad {
			if i == 10 {
				fmt.Fprintf(cfg.Out, "    ... and %d more\n", len(bad)-10)
				break
			}
			fmt.Fprintf(cfg.Out, "    %s\n", b)
		}
	}
	fmt.Fprintf(cfg.Out, "%d passed, %d failed\n", rep.Passed, rep.Failed)
	return rep, nil
}

// nextInTurn is the failpoint the epoch numbered epoch arms in turn, or
// "". A lone daemon's first epochs arm each failpoint once, in order. A
// fleet's slots go on arming each failpoint that has not fired yet (and
// that no other slot has armed now), since one daemon of several may not
// reach a failpoint's count within its epoch.
func nextInTurn(epoch int, fleet bool, kills map[string]int, armed map[string]bool) string {
	if !fleet {
		if epoch < len(failpoints) {
			return failpoints[epoch]
		}
		return ""
	}
	for _, fp := range failpoints {
		if kills[fp] == 0 && !armed[fp] {
			return fp
		}
	}
	return ""
}

// drainReport says how the final drain went: the backlog it found, the
// bound it derived from it, how long it took and how it ended.
type drainReport struct {
	// Began is when the drain started; a run with no event since has
	// made no progress during it.
	Began time.Time
	// Backlog counts the runs neither ended nor parked on a human wait
	// when the drain began; Queued and Held are the daemon's task counts
	// then (parked tasks count as queued).
	Backlog, Queued, Held int
	// Bound is the most the drain could take: the least of Config.Drain
	// and Quiet, grown by PerRun for each run of the backlog.
	Bound time.Duration
	Took  time.Duration
	// Quiet is the window of Config.Quiet: a wake-up not seen within it
	// is lost.
	Quiet time.Duration
	// Quiescent: the drain ended because nothing moved for the quiet
	// window while runs were unfinished; OutOfTime: because the bound
	// passed while runs were still moving. Neither: every run ended.
	Quiescent, OutOfTime bool
	// Left counts the runs still unfinished at the end.
	Left int
}

func (d drainReport) String() string {
	how := "every run ended or parked"
	switch {
	case d.Quiescent:
		how = fmt.Sprintf("quiescent with %d runs unfinished", d.Left)
	case d.OutOfTime:
		how = fmt.Sprintf("bound reached with %d runs unfinished, still moving", d.Left)
	}
	return fmt.Sprintf("drain: backlog %d runs (%d tasks queued, %d held), bound %v, took %v: %s",
		d.Backlog, d.Queued, d.Held, d.Bound.Round(time.Second), d.Took.Round(time.Millisecond), how)
}

// drainBound derives the drain's bound from the backlog it measured: at
// least the configured drain and one quiet window (so a run can always
// show it moves), plus perRun for each run of the backlog, since a backlog
// of thousands of runs behind a few slots legitimately takes minutes.
func drainBound(least, quiet, perRun time.Duration, backlog int) time.Duration {
	return max(least, quiet+5*time.Second, time.Duration(backlog)*perRun)
}

// unfinishedPhases are the phases of a run that has not ended.
var unfinishedPhases = []apitypes.Phase{apitypes.PhaseQueued, apitypes.PhaseRunning, apitypes.PhaseCompleting, apitypes.PhaseWaiting}

// busy says whether a run still has work to do: not ended, and not parked
// on the human wait of the approval kind (which nobody may ever decide).
// The checks look closer at what a waiting run waits for.
func busy(v *apitypes.Run) bool {
	if v.Phase.Terminal() {
		return false
	}
	k := kindByFlow(v.Flow)
	return !(v.Phase == apitypes.PhaseWaiting && k != nil && k.mayWait)
}

// drain waits until the system is quiescent: every run ended or parked on
// a human wait; or nothing moved for the quiet window (what is unfinished
// then is stuck); or the bound derived from the backlog passed while runs
// were still moving (those are reported as unfinished, not as lost). The
// approver goes on deciding: under a backlog most wait runs reach their
// wait only now.
func drain(ctx context.Context, w *world, c *client.Client, cfg Config) (drainReport, error) {
	d := drainReport{Began: time.Now(), Quiet: cfg.Quiet}
	if h, err := c.Health(ctx); err == nil {
		d.Queued, d.Held = h.Queued, h.Held
	}
	var last string
	lastMove := d.Began
	for first := true; ; first = false {
		approveWaiting(ctx, w, c)
		redriveParked(ctx, w, c)
		replyAll(ctx, w, c)
		resolveUnknown(ctx, w, c)
		decideSteer(ctx, w, c)
		raiseBudgets(ctx, w, c)
		var sig strings.Builder
		left := 0
		for _, p := range unfinishedPhases {
			runs, err := client.Collect(c.RunListAll(ctx, client.RunListParams{Phase: p}))
			if err != nil {
				return d, err
			}
			for i := range runs {
				if v := &runs[i]; busy(v) {
					left++
					fmt.Fprintf(&sig, "%s %s %d %s\n", v.ID, v.Phase, v.Attempt, v.UpdatedAt)
				}
			}
		}
		st, err := c.Stats(ctx)
		if err != nil {
			return d, err
		}
		for _, t := range st.Types {
			fmt.Fprintf(&sig, "%s %d %d\n", t.Type, t.Attempts, t.Units)
		}
		now := time.Now()
		if first {
			d.Backlog = left
			d.Bound = drainBound(cfg.Drain, cfg.Quiet, cfg.PerRun, left)
		}
		if s := sig.String(); s != last {
			last, lastMove = s, now
		}
		d.Left, d.Took = left, now.Sub(d.Began)
		switch {
		case left == 0:
			return d, nil
		case now.Sub(lastMove) >= cfg.Quiet:
			d.Quiescent = true
			return d, nil
		case d.Took >= d.Bound:
			d.OutOfTime = true
			return d, nil
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// final is what the checks look at: the store's runs and timelines, as the
// last daemon answered them, and the plugins' own records.
type final struct {
	runs     []apitypes.Run
	children map[string][]apitypes.Run // runs started by a run, by its id
	// scheduled are the runs schedules started; chaos is how long the
	// chaos phase was.
	scheduled []apitypes.Run
	// triggered are the runs triggers started; forked the forks.
	triggered []apitypes.Run
	forked    []apitypes.Run
	chaos     time.Duration
	events    map[string][]apitypes.Event
	records   *records
	kills     map[string]int
	// modelRequests are the requests the agents' model server read.
	modelRequests []llmtest.Request
	// modelBilled is what the model server billed for all of them.
	modelBilled llmtest.Usage
	drain       drainReport
}

func collect(ctx context.Context, w *world, c *client.Client, runs []apitypes.Run) (*final, error) {
	fin := &final{events: map[string][]apitypes.Event{}, children: map[string][]apitypes.Run{}}
	for _, v := range runs {
		// Runs started by subflows, fan-outs and schedules are the
		// engine's, not the client's: their timelines are checked, their
		// identity is not (a schedule's are the tick invariant's).
		switch {
		case v.Parent != "":
			fin.children[v.Parent] = append(fin.children[v.Parent], v)
		case strings.HasPrefix(v.StartedBy, "schedule:"):
			fin.scheduled = append(fin.scheduled, v)
		case strings.HasPrefix(v.StartedBy, "trigger:"):
			fin.triggered = append(fin.triggered, v)
		case v.ForkedFrom != nil:
			fin.forked = append(fin.forked, v)
		case kindByFlow(v.Flow) != nil && (kindByFlow(v.Flow).cohort || isAgentFlow(v.Flow)):
			// The list omits progress; the cohort and waste invariants
			// read it.
			full, err := c.RunGet(ctx, v.ID)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", v.ID, err)
			}
			fin.runs = append(fin.runs, *full)
		default:
			fin.runs = append(fin.runs, v)
		}
		evs, err := client.Collect(c.RunEventsAll(ctx, v.ID, client.EventListParams{}))
		if err != nil {
			return nil, fmt.Errorf("events of %s: %w", v.ID, err)
		}
		fin.events[v.ID] = evs
	}
	return fin, nil
}

// lastLines is the end of a log, indented under a violation.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "        " + strings.Join(lines, "\n        ")
}

// slotName names a fleet's slot after "daemon" ("" for a lone daemon).
func slotName(cfg Config, slot int) string {
	if cfg.Fleet == 0 {
		return ""
	}
	return fmt.Sprintf(" of slot %d", slot)
}

func orNone(fp string) string {
	if fp == "" {
		return "no failpoint"
	}
	return fp
}

func countsLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// dataDir makes a data directory under parent.
func dataDir(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, "weir-soak-")
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(filepath.Join(dir, "data"), 0o700)
}
