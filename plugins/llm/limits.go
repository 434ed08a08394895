package main

import (
	"fmt"
	"sync"
	"time"
)

// limitWindow is the window of requests_per_minute and tokens_per_minute.
const limitWindow = time.Minute

// concurrencyRetryAfter is the wait suggested to a call refused because
// max_concurrent calls are in flight: when one ends is not known, and a
// turn usually takes seconds.
const concurrencyRetryAfter = time.Second

// limiter enforces one model's limits before a call, so that a burst of
// agents queues in weir with a reason instead of hammering the provider
// into 429s (docs/design.md §9: per-model rate limits are admission, not
// retries). The plugin runs as one process per host, so its counts are
// the host's.
type limiter struct {
	alias string
	// maxConcurrent, rpm and tpm are the model's limits; 0 means none.
	maxConcurrent, rpm, tpm int64
	now                     func() time.Time

	mu       sync.Mutex
	inFlight int64
	starts   []time.Time   // call starts within the window, oldest first
	tokens   []*tokenEntry // token reservations within the window, oldest first
}

type tokenEntry struct {
	at time.Time
	n  int64
}

func newLimiter(m *modelConfig, now func() time.Time) *limiter {
	return &limiter{alias: m.Alias, maxConcurrent: m.MaxConcurrent, rpm: m.RequestsPerMinute, tpm: m.TokensPerMinute, now: now}
}

// acquire admits a call expected to use estimate tokens (prompt estimate
// plus max output), or refuses it with E_MODEL_RATE_LOCAL and when to try
// again. settle, called once the call ends, releases its slot and
// replaces the estimate with the tokens used: the provider's usage, 0 for
// a request it refused, or -1 when unknown (the estimate stands).
func (l *limiter) acquire(estimate int64) (settle func(used int64), err *modelError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.prune(now)
	if wait, why := l.decide(now, estimate); why != "" {
		return nil, &modelError{Code: codeRateLocal, Retryable: true, RetryAfter: wait, Msg: fmt.Sprintf("model %q: %s", l.alias, why)}
	}
	l.inFlight++
	l.starts = append(l.starts, now)
	e := &tokenEntry{at: now, n: estimate}
	l.tokens = append(l.tokens, e)
	var once sync.Once
	return func(used int64) {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.inFlight--
			if used >= 0 {
				e.n = used
			}
		})
	}, nil
}

// decide is the admission rule: it returns "" to admit, or why not and
// how long until the call would be admitted. A call larger than the whole
// tokens_per_minute runs alone in an empty window rather than never.
func (l *limiter) decide(now time.Time, estimate int64) (time.Duration, string) {
	if l.maxConcurrent > 0 && l.inFlight >= l.maxConcurrent {
		return concurrencyRetryAfter, fmt.Sprintf("%d calls in flight, max_concurrent is %d", l.inFlight, l.maxConcurrent)
	}
	if l.rpm > 0 && int64(len(l.starts)) >= l.rpm {
		return l.starts[0].Add(limitWindow).Sub(now), fmt.Sprintf("%d calls in the last minute, requests_per_minute is %d", len(l.starts), l.rpm)
	}
	if l.tpm > 0 {
		var sum int64
		for _, e := range l.tokens {
			sum += e.n
		}
		if sum > 0 && sum+estimate > l.tpm {
			// Wait until enough of the window's reservations expire.
			freed := int64(0)
			wait := limitWindow
			for _, e := range l.tokens {
				freed += e.n
				if sum-freed+estimate <= l.tpm || sum-freed == 0 {
					wait = e.at.Add(limitWindow).Sub(now)
					break
				}
			}
			return wait, fmt.Sprintf("%d tokens in the last minute and ~%d for this call, tokens_per_minute is %d", sum, estimate, l.tpm)
		}
	}
	return 0, ""
}

// prune drops starts and reservations older than the window.
func (l *limiter) prune(now time.Time) {
	cut := now.Add(-limitWindow)
	i := 0
	for i < len(l.starts) && !l.starts[i].After(cut) {
		i++
	}
	l.starts = l.starts[i:]
	j := 0
	for j < len(l.tokens) && !l.tokens[j].at.After(cut) {
		j++
	}
	l.tokens = l.tokens[j:]
}
