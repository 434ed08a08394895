package engine

import (
	"math/rand/v2"
	"time"
)

// The engine's decisions are pure functions of what the transaction read
// and the time: a table test covers each without a store, and the
// transaction only applies what they return.

// retryAction is what to do with a failed try of a tool call.
type retryAction int

const (
	// retryFail: the failure is final; the node takes its error wire.
	retryFail retryAction = iota
	// retryLater: park the task and try again after Backoff.
	retryLater
	// retryExhausted: every allowed try failed; dead-letter the task and
	// take the error wire.
	retryExhausted
)

// retryInput is what the retry decision reads.
type retryInput struct {
	Idempotent bool // only idempotent tools are retried automatically...
	NotSent    bool // ...or a call that never reached the tool (not_sent)
	Retryable  bool // the error may go away (retryable, crashed, unknown, not_sent)
	Tries      int  // tries of the call that already failed before this one
	Retries    int  // retries the node allows
	// Base and Max shape the exponential backoff.
	Base, Max time.Duration
	// RetryAfter is the wait the tool asked for (0: none); it is honoured
	// up to Max, so a tool cannot park a task for longer than the engine's
	// own longest backoff.
	RetryAfter time.Duration
}

// retryDecision is the retry decision.
type retryDecision struct {
	Action  retryAction
	Backoff time.Duration // retryLater only
}

// decideRetry decides a failed try: retry after an exponential backoff
// with full jitter (a uniform wait in [1ns, min(Base·2^Tries, Max)]),
// dead-letter once the node's retries are spent, or fail at once for an
// error retrying won't fix or a tool that must not be called twice.
// jitter(n) returns a uniform value in [0, n).
func decideRetry(in retryInput, jitter func(n int64) int64) retryDecision {
	if !(in.Idempotent || in.NotSent) || !in.Retryable {
		return retryDecision{Action: retryFail}
	}
	if in.Tries >= in.Retries {
		if in.Retries > 0 {
			return retryDecision{Action: retryExhausted}
		}
		return retryDecision{Action: retryFail}
	}
	ceil := in.Base << min(in.Tries, 20)
	if ceil > in.Max || ceil <= 0 {
		ceil = in.Max
	}
	backoff := time.Duration(jitter(int64(ceil)) + 1)
	if ra := min(in.RetryAfter, in.Max); ra > backoff {
		backoff = ra
	}
	return retryDecision{Action: retryLater, Backoff: backoff}
}

// jitter is the full jitter of real retries.
func jitter(n int64) int64 { return rand.Int64N(n) }
