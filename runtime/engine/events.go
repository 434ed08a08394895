package engine

import (
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Event types of a run's timeline. The admission events (docs/design.md §4) say
// what the system did; the flow events say where the run went.
const (
	evAccepted        = "accepted"
	evQueued          = "queued"
	evLeased          = "leased"
	evRenewed         = "renewed"
	evExpired         = "expired"
	evDropped         = "dropped"
	evRetry           = "retry_scheduled"
	evDeadLettered    = "dead_lettered"
	evNodeStarted     = "node_started"
	evNodeDone        = "node_completed"
	evNodeFailed      = "node_failed"
	evToolStarted     = "tool_started" // durable "started" of a non-idempotent call
	evWaiting         = "waiting"
	evCancelRequested = "cancel_requested"
	evCompleted       = "completed"
	evFailed          = "failed"
	evCancelled       = "cancelled"
	// evOverspent: a call reported a cost above what it was admitted on;
	// charged, and the run's next node is refused if it no longer fits.
	evOverspent = "overspent"
	// evEventReceived: a wait for an event took one (its id, name, key).
	evEventReceived = "event_received"
)

// Event types of unknown outcomes (reconcile.go, resolve.go).
const (
	// evReconciled: a call whose outcome was unknown asked its tool's
	// reconcile probe; the answer is in the detail.
	evReconciled = "reconciled"
	// evResolved: a person settled an unknown outcome (who, why, the
	// answer).
	evResolved = "resolved"
)

func appendEvent(tx store.Tx, runID, typ string, attempt int, node string, detail map[string]any, at time.Time) error {
	return tx.EventAppend(&store.Event{RunID: runID, At: at, Type: typ, Attempt: attempt, Node: node, Detail: detail})
}
