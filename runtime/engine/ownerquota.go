package engine

import (
	"context"
	"sort"
	"time"

	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// Per-owner quotas at the door (Config.Owners, docs/operators.md "Several
// users on one daemon"): an owner's runs queued (max_queued), started and
// not ended (max_running), the cost its runs spent in the last hour
// (budget_per_hour), and what it stores (storage, storage.go). The daemon's own bounds (MaxQueued) stay E_QUEUE_FULL;
// an owner's own are E_OWNER_QUOTA and E_OWNER_BUDGET, and refuse only new
// work: lowering a quota below what an owner uses now leaves its work in
// hand alone.
//
// Where each figure lives: in the store, shared by a fleet and kept
// across restarts (DESIGN §12). Queued and running counts are counted on
// the store's index of runs by owner and phase (store.RunCounter); a
// daemon's own queued set (queuedRuns) also bounds it, atomically with
// its reservation. Spend is the OwnerSpend rows the charging transaction
// adds to (chargeTx). Checks at the door read committed figures, so
// daemons admitting one owner's starts at the same instant may pass a
// quota by the starts in flight between them.

// SpendWindow is the span budget_per_hour is measured over: a sliding
// hour, in SpendBucket steps.
const (
	SpendWindow = time.Hour
	SpendBucket = time.Minute
)

const spendBuckets = int64(SpendWindow / SpendBucket)

// spendMinute is the OwnerSpend minute a charge at now goes into.
func spendMinute(now time.Time) int64 { return now.Unix() / int64(SpendBucket/time.Second) }

// spendSince is the first minute of the window ending at now: the window
// slides rather than resets, so an owner cannot spend two hours' budget
// across one window's edge, and a refusal's Retry-After is when the
// oldest spending leaves it rather than the top of the next hour.
func spendSince(now time.Time) int64 { return spendMinute(now) - spendBuckets + 1 }

// windowSpent sums rows (one owner's, from spendSince(now) on, in minute
// order) and, when the sum is at least budget (> 0), says how long until
// enough of it leaves the window for spending to be below budget again.
func windowSpent(rows []store.OwnerSpend, budget int64, now time.Time) (int64, time.Duration) {
	var total int64
	for _, r := range rows {
		total += r.Cost
	}
	if budget <= 0 || total < budget {
		return total, 0
	}
	left := total
	for _, r := range rows {
		left -= r.Cost
		if left < budget {
			leaves := time.Unix((r.Minute+1)*int64(SpendBucket/time.Second), 0).Add(SpendWindow)
			return total, max(leaves.Sub(now), time.Second)
		}
	}
	return total, SpendWindow
}

// ownerSpentTx is owner's spend in the window ending at now, with
// windowSpent's wait for budget.
func ownerSpentTx(tx store.Tx, owner string, budget int64, now time.Time) (int64, time.Duration, error) {
	rows, err := tx.OwnerSpendList(store.OwnerSpendListParams{Owner: owner, Since: spendSince(now)})
	if err != nil {
		return 0, 0, err
	}
	spent, wait := windowSpent(rows, budget, now)
	return spent, wait, nil
}

// ownerBudgetErr is the refusal of work whose owner spent its
// budget_per_hour; what names the work ("try", "redrive").
func ownerBudgetErr(owner string, spent, budget int64, wait time.Duration, what string) *Error {
	err := protocolErr(CodeOwnerBudget, "owner %q spent %d of its budget_per_hour of %d in the last hour; %s again in %s",
		owner, spent, budget, what, wait.Round(time.Second))
	err.RetryAfter = wait
	return err
}

// startedPhases are the phases of a run started and not ended, which
// max_running counts.
var startedPhases = []store.Phase{store.PhaseRunning, store.PhaseWaiting, store.PhaseCompleting}

// ownerCount counts owner's runs in phases: on the store's index where
// the store has one (store.RunCounter), else by listing them, reading at
// most limit (0: all).
func ownerCount(tx store.Tx, owner string, phases []store.Phase, limit int) (int, error) {
	n := 0
	for _, p := range phases {
		var c int
		if rc, ok := baseTx(tx).(store.RunCounter); ok {
			var err error
			if c, err = rc.OwnerRunCount(owner, p); err != nil {
				return 0, err
			}
		} else {
			runs, err := tx.RunList(store.RunListParams{Owner: owner, Phase: p, Limit: limit})
			if err != nil {
				return 0, err
			}
			c = len(runs)
		}
		n += c
		if limit > 0 && n >= limit {
			return n, nil
		}
	}
	return n, nil
}

// OwnerQuotaRetryAfter is the Retry-After of E_OWNER_QUOTA: the owner's
// own runs must move on first, which takes about as long as the daemon's
// queue does.
const OwnerQuotaRetryAfter = 2 * time.Second

// ownerDoor is admission's check of the owners' own quotas.
type ownerDoor struct {
	st      store.Store
	clock   clock.Clock
	stats   *stats
	storage storageUse
}

// check refuses a start of owner's whose storage, queued runs, running
// runs or spend in the window are at its share's quotas, as the store
// counts them for the whole fleet. This daemon's own queued runs are
// bounded again with the reservation (queuedRuns.reserve), which is
// atomic with it.
func (d *ownerDoor) check(ctx context.Context, owner string, share OwnerShare) error {
	if err := d.checkStorage(owner, share); err != nil {
		return err
	}
	if share.BudgetPerHour <= 0 && share.MaxRunning <= 0 && share.MaxQueued <= 0 {
		return nil
	}
	var refusal *Error
	err := d.st.View(ctx, func(tx store.Tx) error {
		var err error
		refusal, err = d.checkTx(tx, owner, share, true)
		return err
	})
	if err != nil {
		return storageErr(err)
	}
	if refusal != nil {
		return refusal
	}
	return nil
}

// checkTx is check's reading of the store: the refusal, if any, of work
// of owner's at share's quotas; starting says whether the work is a new
// run (counted against max_queued and max_running) or work of a run
// accepted before (its budget only).
func (d *ownerDoor) checkTx(tx store.Tx, owner string, share OwnerShare, starting bool) (*Error, error) {
	if share.BudgetPerHour > 0 {
		spent, wait, err := ownerSpentTx(tx, owner, share.BudgetPerHour, d.clock.Now())
		if err != nil {
			return nil, err
		}
		if spent >= share.BudgetPerHour {
			d.stats.refused(CodeOwnerBudget)
			what := "try"
			if !starting {
				what = "redrive"
			}
			return ownerBudgetErr(owner, spent, share.BudgetPerHour, wait, what), nil
		}
	}
	if !starting {
		return nil, nil
	}
	if share.MaxQueued > 0 {
		n, err := ownerCount(tx, owner, []store.Phase{store.PhaseQueued}, share.MaxQueued)
		if err != nil {
			return nil, err
		}
		if n >= share.MaxQueued {
			d.stats.refused(CodeOwnerQuota)
			return ownerQueuedErr(owner, share.MaxQueued), nil
		}
	}
	if share.MaxRunning > 0 {
		n, err := ownerCount(tx, owner, startedPhases, share.MaxRunning)
		if err != nil {
			return nil, err
		}
		if n >= share.MaxRunning {
			d.stats.refused(CodeOwnerQuota)
			err := protocolErr(CodeOwnerQuota, "owner %q has %d runs started and not ended: its max_running is %d; try again when one ends",
				owner, n, share.MaxRunning)
			err.RetryAfter = OwnerQuotaRetryAfter
			return err, nil
		}
	}
	return nil, nil
}

// ownerQueuedErr is the refusal of a start whose owner's queued runs are
// at its max_queued.
func ownerQueuedErr(owner string, max int) *Error {
	err := protocolErr(CodeOwnerQuota, "owner %q has %d runs queued: its max_queued is %d; try again later", owner, max, max)
	err.RetryAfter = OwnerQuotaRetryAfter
	return err
}

// OwnerStats is one owner's use of the daemon and its share.
type OwnerStats struct {
	Owner string `json:"owner"`
	// Running counts its runs started and not ended; Queued its runs
	// accepted and not yet started (this daemon's view).
	Running int `json:"running"`
	Queued  int `json:"queued"`
	// Spent is the cost its runs were charged in the last hour
	// (SpendWindow), by every daemon of the store.
	Spent int64 `json:"spent"`
	// The share in force: its weight and quotas (0: none).
	Weight        int   `json:"weight"`
	MaxRunning    int   `json:"max_running,omitempty"`
	MaxQueued     int   `json:"max_queued,omitempty"`
	BudgetPerHour int64 `json:"budget_per_hour,omitempty"`
}

// MaxOwnerStats bounds the owners OwnerStats lists: the ones using the
// most, then by name.
const MaxOwnerStats = 1000

// OwnerStats lists each owner with work or spending on the daemon, and
// each owner the config names, with its share; only owner's when owner
// is not "" (a caller sees only its own). Running counts are read from
// the store.
func (e *Engine) OwnerStats(ctx context.Context, owner string) ([]OwnerStats, error) {
	cfg := e.cfg.Load()
	queued := e.queued.owners()
	spent := map[string]int64{}
	running := map[string]int{}
	err := e.st.View(ctx, func(tx store.Tx) error {
		rows, err := tx.OwnerSpendList(store.OwnerSpendListParams{Owner: owner, Since: spendSince(e.clock.Now())})
		if err != nil {
			return err
		}
		for _, r := range rows {
			spent[r.Owner] += r.Cost
		}
		for _, p := range startedPhases {
			runs, err := tx.RunList(store.RunListParams{Owner: owner, Phase: p})
			if err != nil {
				return err
			}
			for _, r := range runs {
				running[r.Owner]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, storageErr(err)
	}
	names := map[string]bool{}
	for o := range queued {
		names[o] = true
	}
	for o := range spent {
		names[o] = true
	}
	for o := range running {
		names[o] = true
	}
	for o := range cfg.Owners {
		names[o] = true
	}
	out := []OwnerStats{}
	for o := range names {
		if owner != "" && o != owner {
			continue
		}
		s := cfg.ShareOf(o)
		out = append(out, OwnerStats{Owner: o, Running: running[o], Queued: queued[o], Spent: spent[o],
			Weight: s.Weight, MaxRunning: s.MaxRunning, MaxQueued: s.MaxQueued, BudgetPerHour: s.BudgetPerHour})
	}
	if owner != "" && len(out) == 0 {
		s := cfg.ShareOf(owner)
		out = append(out, OwnerStats{Owner: owner, Weight: s.Weight, MaxRunning: s.MaxRunning, MaxQueued: s.MaxQueued, BudgetPerHour: s.BudgetPerHour})
	}
	sort.Slice(out, func(i, j int) bool {
		ui, uj := out[i].Running+out[i].Queued, out[j].Running+out[j].Queued
		if ui != uj {
			return ui > uj
		}
		if out[i].Spent != out[j].Spent {
			return out[i].Spent > out[j].Spent
		}
		return out[i].Owner < out[j].Owner
	})
	if len(out) > MaxOwnerStats {
		out = out[:MaxOwnerStats]
	}
	return out, nil
}
