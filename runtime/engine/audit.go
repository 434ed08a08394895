package engine

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

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
	// DefaultAuditRetention is how long audit events are kept when the
	// engine keeps finished runs forever (Config.Retention 0); otherwise
	// they are kept as long as finished runs.
	DefaultAuditRetention = 30 * 24 * time.Hour
	// maxAuditCallers bounds the callers whose rate the engine tracks;
	// beyond it, callers whose allowance is full again are forgotten.
	maxAuditCallers = 10000
	// auditPruneBatch bounds the audit events one transaction removes.
	auditPruneBatch = 1000
)

// auditLimiter is a token bucket per caller.
type auditLimiter struct {
	mu      sync.Mutex
	callers map[string]*auditBucket
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
	if l.callers == nil {
		l.callers = map[string]*auditBucket{}
	}
	b := l.callers[caller]
	if b == nil {
		if len(l.callers) >= maxAuditCallers {
			l.forget(now)
		}
		b = &auditBucket{tokens: AuditBurst, at: now}
		l.callers[caller] = b
	}
	b.refill(now)
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

func (b *auditBucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(AuditBurst, b.tokens+float64(d)/float64(AuditInterval))
		b.at = now
	}
}

// forget drops the callers whose allowance is full and who have nothing
// suppressed: remembering them changes nothing.
func (l *auditLimiter) forget(now time.Time) {
	for c, b := range l.callers {
		b.refill(now)
		if b.tokens >= AuditBurst && b.suppressed == 0 {
			delete(l.callers, c)
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

// auditForeign records a refused foreign access to a run in the audit
// stream. The run itself, its events included, stays byte-for-byte
// unchanged.
func (e *Engine) auditForeign(ctx context.Context, owner, runID, action string) {
	e.audit(ctx, owner, action, "run", runID)
}

// audit records that caller was refused action on the object kind
// ("run", "flow") named name, within the stream's bounds.
func (e *Engine) audit(ctx context.Context, caller, action, kind, name string) {
	now := e.now()
	ok, suppressed := e.auditLimit.admit(caller, now)
	if !ok {
		return
	}
	detail := map[string]any{"caller": auditField(caller), "action": action, kind: auditField(name)}
	if suppressed > 0 {
		detail["suppressed"] = suppressed
	}
	err := e.st.Update(ctx, func(tx store.Tx) error {
		return appendEvent(tx, AuditStream, "refused_foreign", 0, "", detail, now)
	})
	if err != nil {
		e.log.Error("writing audit event", "error", err)
	}
}

// auditRetention is how long audit events are kept.
func (e *Engine) auditRetention() time.Duration {
	if r := e.config().Retention; r > 0 {
		return r
	}
	return DefaultAuditRetention
}

// PruneAudit removes the audit events recorded before cutoff and returns
// how many it removed.
func (e *Engine) PruneAudit(ctx context.Context, cutoff time.Time) (int, error) {
	removed := 0
	for {
		var evs []*store.Event
		if err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			evs, err = tx.EventList(store.EventListParams{RunID: AuditStream, Limit: auditPruneBatch})
			return err
		}); err != nil {
			return removed, err
		}
		old := 0
		for old < len(evs) && evs[old].At.Before(cutoff) {
			old++
		}
		if old == 0 {
			return removed, nil
		}
		before := evs[old-1].Seq + 1
		if err := e.st.Update(ctx, func(tx store.Tx) error { return tx.EventDeleteBefore(AuditStream, before) }); err != nil {
			return removed, err
		}
		removed += old
		if old < len(evs) {
			return removed, nil
		}
	}
}
