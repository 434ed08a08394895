package engine

import (
	"context"
	"sort"
	"sync"
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
// Where each figure lives: queued counts are admission's queued set
// (queuedRuns, per daemon, rebuilt from the store at recovery); running
// counts are read from the store's run records at the door, so a fleet
// shares them; spend is the ledger's, kept per daemon in spendWindow and
// lost at a restart (durable spend rows shared by a fleet are the next
// step, docs/design.md §8.2).

// SpendWindow is the span budget_per_hour is measured over: a sliding
// hour, in SpendBucket steps.
const (
	SpendWindow = time.Hour
	SpendBucket = time.Minute
)

const spendBuckets = int(SpendWindow / SpendBucket)

// spendWindow is the cost each owner's runs settled in the last
// SpendWindow, in minute buckets: sliding rather than fixed, so an owner
// cannot spend two hours' budget across one window's edge, and a refusal's
// Retry-After is when the oldest spending leaves the window rather than
// the top of the next hour. Memory is one small array per owner that
// spent in the window.
type spendWindow struct {
	mu     sync.Mutex
	owners map[string]*spendBucketsOf
}

type spendBucketsOf struct {
	cost [spendBuckets]int64
	at   [spendBuckets]int64 // the bucket's minute (unix minutes); stale when older than the window
}

func bucketOf(now time.Time) int64 { return now.Unix() / int64(SpendBucket/time.Second) }

// add records cost settled for owner at now.
func (w *spendWindow) add(owner string, cost int64, now time.Time) {
	if cost <= 0 {
		return
	}
	m := bucketOf(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners == nil {
		w.owners = map[string]*spendBucketsOf{}
	}
	b := w.owners[owner]
	if b == nil {
		b = &spendBucketsOf{}
		w.owners[owner] = b
	}
	i := int(m % int64(spendBuckets))
	if b.at[i] != m {
		b.at[i], b.cost[i] = m, 0
	}
	b.cost[i] += cost
}

// spent is owner's cost in the window ending at now and, when it is at
// least budget (> 0), how long until enough of it leaves the window for
// spending to be below budget again.
func (w *spendWindow) spent(owner string, budget int64, now time.Time) (int64, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.owners[owner]
	if b == nil {
		return 0, 0
	}
	total, live := liveBuckets(b, now)
	if budget <= 0 || total < budget {
		return total, 0
	}
	// Oldest first: the spending that leaves the window first.
	sort.Slice(live, func(i, j int) bool { return live[i].at < live[j].at })
	left := total
	for _, l := range live {
		left -= l.cost
		if left < budget {
			leaves := time.Unix((l.at+1)*int64(SpendBucket/time.Second), 0).Add(SpendWindow)
			return total, max(leaves.Sub(now), time.Second)
		}
	}
	return total, SpendWindow
}

type liveBucket struct{ at, cost int64 }

// liveBuckets sums b's buckets within the window ending at now.
func liveBuckets(b *spendBucketsOf, now time.Time) (int64, []liveBucket) {
	m := bucketOf(now)
	var total int64
	var live []liveBucket
	for i := range b.at {
		if b.cost[i] > 0 && b.at[i] > m-int64(spendBuckets) && b.at[i] <= m {
			total += b.cost[i]
			live = append(live, liveBucket{b.at[i], b.cost[i]})
		}
	}
	return total, live
}

// all is every owner's spend in the window ending at now; owners whose
// spending has all left it are forgotten.
func (w *spendWindow) all(now time.Time) map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int64{}
	for o, b := range w.owners {
		total, _ := liveBuckets(b, now)
		if total == 0 {
			delete(w.owners, o)
			continue
		}
		out[o] = total
	}
	return out
}

// startedPhases are the phases of a run started and not ended, which
// max_running counts.
var startedPhases = []store.Phase{store.PhaseRunning, store.PhaseWaiting, store.PhaseCompleting}

// ownerRunning counts owner's runs started and not ended, reading at most
// limit of them (0: all).
func ownerRunning(tx store.Tx, owner string, limit int) (int, error) {
	n := 0
	for _, p := range startedPhases {
		runs, err := tx.RunList(store.RunListParams{Owner: owner, Phase: p, Limit: limit})
		if err != nil {
			return 0, err
		}
		n += len(runs)
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

// ownerDoor is admission's check of the owners' own quotas, and the
// owners' spend in the window.
type ownerDoor struct {
	st      store.Store
	clock   clock.Clock
	stats   *stats
	spend   spendWindow
	storage storageUse
}

// check refuses a start of owner's whose storage, running runs or spend
// in the window are at its share's quotas. The queued quota is checked with the
// reservation (queuedRuns.reserve), which is atomic with it.
func (d *ownerDoor) check(ctx context.Context, owner string, share OwnerShare) error {
	if err := d.checkStorage(owner, share); err != nil {
		return err
	}
	if share.BudgetPerHour > 0 {
		spent, wait := d.spend.spent(owner, share.BudgetPerHour, d.clock.Now())
		if spent >= share.BudgetPerHour {
			d.stats.refused(CodeOwnerBudget)
			err := protocolErr(CodeOwnerBudget, "owner %q spent %d of its budget_per_hour of %d in the last hour; try again in %s",
				owner, spent, share.BudgetPerHour, wait.Round(time.Second))
			err.RetryAfter = wait
			return err
		}
	}
	if share.MaxRunning > 0 {
		var n int
		err := d.st.View(ctx, func(tx store.Tx) error {
			var err error
			n, err = ownerRunning(tx, owner, share.MaxRunning)
			return err
		})
		if err != nil {
			return storageErr(err)
		}
		if n >= share.MaxRunning {
			d.stats.refused(CodeOwnerQuota)
			err := protocolErr(CodeOwnerQuota, "owner %q has %d runs started and not ended: its max_running is %d; try again when one ends",
				owner, n, share.MaxRunning)
			err.RetryAfter = OwnerQuotaRetryAfter
			return err
		}
	}
	return nil
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
	// Spent is the cost its runs settled in the last hour (SpendWindow),
	// on this daemon.
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
	spent := e.owners.spend.all(e.clock.Now())
	running := map[string]int{}
	err := e.st.View(ctx, func(tx store.Tx) error {
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
