package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/store"
)

const unitOwnerSrc = `
flow(name = "held", nodes = [task("t", tool = "kit.block", args = {"gate": "g"})])
flow(name = "quick", nodes = [task("t", tool = "kit.echo", args = {"hi": 1})])
flow(name = "costly", nodes = [task("t", tool = "kit.spend", args = {"cost": 10})])
`

// submitAs starts flow for owner and returns the run id or the refusal.
func submitAs(b *testBundle, owner, flow string) (string, error) {
	res, err := b.eng.Submit(context.Background(), StartRequest{Owner: owner, Flow: flow, Input: json.RawMessage(`{}`)})
	if err != nil {
		return "", err
	}
	return res.RunID, nil
}

// refusedWith fails t unless err is an *Error of code with a Retry-After.
func refusedWith(t *testing.T, err error, code string) *Error {
	t.Helper()
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	if ee.RetryAfter <= 0 {
		t.Errorf("%s has no Retry-After", code)
	}
	return ee
}

// An owner at its max_queued is refused with E_OWNER_QUOTA; another owner
// is not, and the daemon's own bound stays E_QUEUE_FULL.
func TestUnitOwnerMaxQueued(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Workers: 1, MaxQueued: 10, Owners: map[string]OwnerShare{"alice": {MaxQueued: 2}}}, unitOwnerSrc)
	first := b.start(t, "held", `{}`, "")
	b.wait(t, first, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	for range 2 { // the one slot is held: these stay queued
		if _, err := submitAs(b, "alice", "quick"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := submitAs(b, "alice", "quick")
	if ee := refusedWith(t, err, CodeOwnerQuota); !containsAll(ee.Message, `"alice"`, "max_queued is 2") {
		t.Errorf("refusal does not name the owner and its quota: %s", ee.Message)
	}
	if _, err := submitAs(b, "bob", "quick"); err != nil {
		t.Fatalf("bob refused for alice's quota: %v", err)
	}
	if got := b.eng.Stats().Refusals[CodeOwnerQuota]; got != 1 {
		t.Errorf("%d E_OWNER_QUOTA refusals counted, want 1", got)
	}
	b.kit.open("g")
	b.waitTerminal(t, first)
	var id string
	b.waitFor(t, "alice's queue to drain", func() bool {
		var err error
		id, err = submitAs(b, "alice", "quick")
		return err == nil
	})
	b.waitTerminal(t, id)
}

// An owner with max_running runs started and not ended is refused at the
// door; lowering the quota below what it uses refuses new work only.
func TestUnitOwnerMaxRunning(t *testing.T) {
	t.Parallel()
	cfg := Config{Workers: 4, Owners: map[string]OwnerShare{"alice": {MaxRunning: 2}}}
	b := setupUnit(t, cfg, unitOwnerSrc)
	var held []string
	for range 2 {
		id := b.start(t, "held", `{}`, "")
		b.wait(t, id, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
		held = append(held, id)
	}
	_, err := submitAs(b, "alice", "quick")
	if ee := refusedWith(t, err, CodeOwnerQuota); !containsAll(ee.Message, "2 runs started", "max_running is 2") {
		t.Errorf("refusal does not name the figure and the quota: %s", ee.Message)
	}
	if _, err := submitAs(b, "bob", "quick"); err != nil {
		t.Fatalf("bob refused for alice's quota: %v", err)
	}
	// Lowered to 1 while 2 run: both go on to the end, and no new one is
	// accepted until one of them has ended.
	cfg.Owners = map[string]OwnerShare{"alice": {MaxRunning: 1}}
	b.eng.Reload(cfg)
	if _, err := submitAs(b, "alice", "quick"); err == nil {
		t.Fatal("a start accepted over the lowered max_running")
	}
	b.kit.open("g")
	for _, id := range held {
		if r := b.waitTerminal(t, id); r.Phase != store.PhaseCompleted {
			t.Errorf("run in hand %s ended %s %+v after the quota was lowered", id, r.Phase, r.Error)
		}
	}
	if _, err := submitAs(b, "alice", "quick"); err != nil {
		t.Fatalf("alice refused once her runs ended: %v", err)
	}
}

// budget_per_hour: once an owner's runs spent it in the last hour, its
// starts are refused with E_OWNER_BUDGET until the spending leaves the
// window; another owner is unaffected.
func TestUnitOwnerBudgetPerHour(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Owners: map[string]OwnerShare{"alice": {BudgetPerHour: 15}}}, unitOwnerSrc)
	for range 2 { // 10, then 20: the second start came while under 15
		id, err := submitAs(b, "alice", "costly")
		if err != nil {
			t.Fatal(err)
		}
		b.waitTerminal(t, id)
	}
	_, err := submitAs(b, "alice", "costly")
	ee := refusedWith(t, err, CodeOwnerBudget)
	if !containsAll(ee.Message, "spent 20", "budget_per_hour of 15") {
		t.Errorf("refusal does not name the figure and the budget: %s", ee.Message)
	}
	if ee.RetryAfter > SpendWindow+SpendBucket || ee.RetryAfter < SpendWindow-SpendBucket {
		t.Errorf("Retry-After %s, want about an hour (all of it was spent now)", ee.RetryAfter)
	}
	if _, err := submitAs(b, "bob", "quick"); err != nil {
		t.Fatalf("bob refused for alice's budget: %v", err)
	}
	b.clock.Advance(ee.RetryAfter)
	if _, err := submitAs(b, "alice", "quick"); err != nil {
		t.Fatalf("alice refused after her Retry-After: %v", err)
	}
}

// The window slides: spending leaves it an hour after its minute, and the
// Retry-After is when enough of it has left.
func TestSpendWindowSlides(t *testing.T) {
	t.Parallel()
	t0 := unitEpoch
	rows := []store.OwnerSpend{
		{Owner: "alice", Minute: spendMinute(t0), Host: "a", Cost: 4},
		{Owner: "alice", Minute: spendMinute(t0), Host: "b", Cost: 2}, // one minute, two daemons
		{Owner: "alice", Minute: spendMinute(t0.Add(30 * time.Minute)), Host: "a", Cost: 6},
	}
	// in is what OwnerSpendList answers for the window ending at now.
	in := func(now time.Time) []store.OwnerSpend {
		var out []store.OwnerSpend
		for _, r := range rows {
			if r.Minute >= spendSince(now) {
				out = append(out, r)
			}
		}
		return out
	}
	now := t0.Add(40 * time.Minute)
	if spent, wait := windowSpent(in(now), 12, now); spent != 12 || wait != 21*time.Minute {
		t.Errorf("at +40m: spent %d, wait %s; want 12 and 21m (the +0 minute leaves at +61m)", spent, wait)
	}
	if spent, wait := windowSpent(in(now), 13, now); spent != 12 || wait != 0 {
		t.Errorf("under the budget: spent %d, wait %s; want 12 and 0", spent, wait)
	}
	// Both minutes must go to be under 6: the later one leaves at +91m.
	if _, wait := windowSpent(in(now), 6, now); wait != 51*time.Minute {
		t.Errorf("budget 6: wait %s, want 51m", wait)
	}
	if spent, _ := windowSpent(in(t0.Add(61*time.Minute)), 0, t0.Add(61*time.Minute)); spent != 6 {
		t.Errorf("at +61m: spent %d, want 6", spent)
	}
	if got := spendSince(t0.Add(59*time.Minute + 59*time.Second)); got != spendMinute(t0) {
		t.Errorf("the window ending 59m59s after t0 starts at minute %d, want t0's %d", got, spendMinute(t0))
	}
}

// budget_per_hour is the fleet's and outlives a restart: what an owner's
// runs spent through one engine refuses its starts at another engine of
// the same store, and at an engine opened afterwards. (Before, each kept
// its own window in memory: the owner could spend the budget once per
// daemon, and again after each restart.)
func TestUnitOwnerBudgetIsTheFleets(t *testing.T) {
	t.Parallel()
	cfg := Config{HostID: "a", Owners: map[string]OwnerShare{"alice": {BudgetPerHour: 15}}}
	b := setupUnit(t, cfg, unitOwnerSrc)
	other := func(host string) *Engine {
		c := cfg
		c.HostID, c.Store, c.Clock, c.Tools, c.Tick = host, b.st, b.clock, b.tools, b.tick
		return openEngine(t, c, "")
	}
	engB := other("b")
	for _, eng := range []*Engine{b.eng, engB} { // 10 each: both under 15 when started
		res, err := eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "costly", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		b.waitTerminal(t, res.RunID)
	}
	for i, eng := range []*Engine{b.eng, engB, other("c")} {
		_, err := eng.Submit(context.Background(), StartRequest{Owner: "alice", Flow: "costly", Input: json.RawMessage(`{}`)})
		if ee := refusedWith(t, err, CodeOwnerBudget); !containsAll(ee.Message, "spent 20", "budget_per_hour of 15") {
			t.Errorf("engine %d: refusal does not name what the fleet spent: %s", i, ee.Message)
		}
	}
	stats, err := engB.OwnerStats(context.Background(), "alice")
	if err != nil || len(stats) != 1 || stats[0].Spent != 20 {
		t.Errorf("alice's stats at engine b: %+v, %v; want spent 20", stats, err)
	}
}

// OwnerStats shows every owner to the operator ("") and only the asker's
// own otherwise.
func TestUnitOwnerStats(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Owners: map[string]OwnerShare{"carol": {Weight: 3, MaxQueued: 5}}}, unitOwnerSrc)
	held := b.start(t, "held", `{}`, "")
	b.wait(t, held, "running", func(r *store.Run) bool { return r.Phase == store.PhaseRunning })
	if _, err := submitAs(b, "bob", "costly"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "bob's spending", func() bool {
		own, err := b.eng.OwnerStats(context.Background(), "bob")
		return err == nil && len(own) == 1 && own[0].Spent == 10 && own[0].Running == 0
	})
	all, err := b.eng.OwnerStats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]OwnerStats{}
	for _, s := range all {
		got[s.Owner] = s
	}
	if len(got) != 3 || got["alice"].Running != 1 || got["bob"].Spent != 10 || got["carol"].Weight != 3 || got["carol"].MaxQueued != 5 {
		t.Errorf("operator's view = %+v", all)
	}
	own, err := b.eng.OwnerStats(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || own[0].Owner != "bob" || own[0].Spent != 10 || own[0].Weight != 1 {
		t.Errorf("bob's view = %+v, want his own alone", own)
	}
	b.kit.open("g")
	b.waitTerminal(t, held)
}

// containsAll reports whether s holds every part.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// waitFor waits until cond holds.
func (b *testBundle) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("never saw %s", what)
	})
}
