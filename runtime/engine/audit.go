package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/engine/internal/pruner"
	"github.com/weirhq/weir/runtime/internal/clock"
	"github.com/weirhq/weir/runtime/store"
)

// AuditStream is the pseudo run id whose timeline holds audit events.
const AuditStream = "audit"

// Bounds of the audit stream. A refused caller's one allowed effect is an
// audit event (docs/design.md §8); these bounds keep that effect from
// becoming a way to fill the store or the operator's screen.
const (
	// MaxAuditFieldBytes bounds each string an audit event quotes from
	// its caller (the caller, a run id, a flow name): longer ones are
	// cut, and the cut says how long the original was.
	MaxAuditFieldBytes = 128
	// AuditBurst is how many audit events one caller may cause at once;
	// after that, one more per AuditInterval. Refusals beyond that are
	// still refused but only counted: the count rides on the caller's
	// next recorded event as "suppressed".
	AuditBurst    = 20
	AuditInterval = 3 * time.Second
	// AuditRunBurst is how many refused foreign accesses to one existing
	// run are recorded after their callers' own allowance is spent; after
	// that, one more per AuditRunInterval. Made-up run ids are the flood a
	// caller's allowance is for; an access to a real run of someone else
	// is rare and is what the operator needs to see, so it keeps its own
	// record per run, whatever its caller did before.
	AuditRunBurst    = 5
	AuditRunInterval = time.Minute
	// DefaultAuditRetention is how long audit events are kept when the
	// engine keeps finished runs forever (Config.Retention 0); otherwise
	// they are kept as long as finished runs.
	DefaultAuditRetention = 30 * 24 * time.Hour
	// maxAuditCallers bounds the callers (and the runs) whose rate the
	// engine tracks; beyond it, those whose allowance is full again are
	// forgotten.
	maxAuditCallers = 10000
)

// auditLimiter holds a token bucket per caller and one per run that
// foreign callers tried.
type auditLimiter struct {
	mu      sync.Mutex
	callers auditBuckets
	runs    auditBuckets
}

// auditBuckets are token buckets by key, each holding burst tokens and
// regaining one per interval.
type auditBuckets struct {
	burst    float64
	interval time.Duration
	m        map[string]*auditBucket
}

type auditBucket struct {
	tokens     float64
	at         time.Time
	suppressed int
}

// admit decides whether an event of caller at now is recorded and, if so,
// how many of caller's events were suppressed since its last recorded one.
func (l *auditLimiter) admit(caller string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.callers.burst, l.callers.interval = AuditBurst, AuditInterval
	return l.callers.take(caller, now)
}

// admitRun decides, for a foreign access to the existing run runID that
// its caller's allowance refused, whether the run's own allowance records
// it; if so, the caller's count of suppressed events gives this one back.
func (l *auditLimiter) admitRun(caller, runID string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs.burst, l.runs.interval = AuditRunBurst, AuditRunInterval
	ok, suppressed = l.runs.take(runID, now)
	if b := l.callers.m[caller]; ok && b != nil && b.suppressed > 0 {
		b.suppressed--
	}
	return ok, suppressed
}

func (bs *auditBuckets) take(key string, now time.Time) (ok bool, suppressed int) {
	if bs.m == nil {
		bs.m = map[string]*auditBucket{}
	}
	b := bs.m[key]
	if b == nil {
		if len(bs.m) >= maxAuditCallers {
			bs.forget(now)
		}
		b = &auditBucket{tokens: bs.burst, at: now}
		bs.m[key] = b
	}
	bs.refill(b, now)
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

func (bs *auditBuckets) refill(b *auditBucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(bs.burst, b.tokens+float64(d)/float64(bs.interval))
		b.at = now
	}
}

// forget drops the buckets whose allowance is full and that have nothing
// suppressed: remembering them changes nothing.
func (bs *auditBuckets) forget(now time.Time) {
	for k, b := range bs.m {
		bs.refill(b, now)
		if b.tokens >= bs.burst && b.suppressed == 0 {
			delete(bs.m, k)
		}
	}
}

// auditField cuts s to MaxAuditFieldBytes (on a rune boundary) and says
// how long it was.
func auditField(s string) string {
	if len(s) <= MaxAuditFieldBytes {
		return s
	}
	cut := MaxAuditFieldBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:cut], len(s))
}

// auditor writes the audit stream (AuditStream): the refused callers,
// each within its allowance (auditLimiter), every field bounded.
type auditor struct {
	st    store.Store
	log   hclog.Logger
	clock clock.Clock
	cfg   *atomic.Pointer[Config] // the engine's, swapped by Reload
	limit auditLimiter
}

// foreign records a refused foreign access to a run in the audit
// stream. The run itself, its events included, stays byte-for-byte
// unchanged. Once the caller's allowance is spent, an access to a run
// that exists is still recorded within that run's own allowance
// (AuditRunBurst): the store is read to tell it from a made-up id only
// then, on the path of the flood.
func (a *auditor) foreign(ctx context.Context, owner, runID, action string) {
	now := a.clock.Now()
	ok, suppressed := a.limit.admit(owner, now)
	detail := map[string]any{"caller": auditField(owner), "action": action, "run": auditField(runID)}
	if ok {
		if suppressed > 0 {
			detail["suppressed"] = suppressed
		}
		a.write(ctx, detail, now)
		return
	}
	if !a.runExists(ctx, runID) {
		return
	}
	if ok, suppressed = a.limit.admitRun(owner, runID, now); !ok {
		return
	}
	detail["over_caller_limit"] = true
	if suppressed > 0 {
		detail["suppressed_on_run"] = suppressed
	}
	a.write(ctx, detail, now)
}

// runExists reports whether the store holds runID; a failed read counts
// as no (the caller's allowance already decided the common case).
func (a *auditor) runExists(ctx context.Context, runID string) bool {
	err := a.st.View(ctx, func(tx store.Tx) error {
		_, err := tx.RunGet(runID)
		return err
	})
	return err == nil
}

// refused records that caller was refused action on the object kind
// ("run", "flow") named name, within the stream's bounds.
func (a *auditor) refused(ctx context.Context, caller, action, kind, name string) {
	now := a.clock.Now()
	ok, suppressed := a.limit.admit(caller, now)
	if !ok {
		return
	}
	detail := map[string]any{"caller": auditField(caller), "action": action, kind: auditField(name)}
	if suppressed > 0 {
		detail["suppressed"] = suppressed
	}
	a.write(ctx, detail, now)
}

func (a *auditor) write(ctx context.Context, detail map[string]any, now time.Time) {
	err := a.st.Update(ctx, func(tx store.Tx) error {
		return appendEvent(tx, AuditStream, "refused_foreign", 0, "", detail, now)
	})
	if err != nil {
		a.log.Error("writing audit event", "error", err)
	}
}

// retention is how long audit events are kept.
func (a *auditor) retention() time.Duration {
	if r := a.cfg.Load().Retention; r > 0 {
		return r
	}
	return DefaultAuditRetention
}

// PruneAudit removes the audit events recorded before cutoff and returns
// how many it removed.
func (e *Engine) PruneAudit(ctx context.Context, cutoff time.Time) (int, error) {
	return pruner.Audit(ctx, e.st, AuditStream, cutoff)
}
