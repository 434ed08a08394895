package store

import (
	"encoding/json"
	"time"
)

// CohortState is where a fan-out cohort is in its life (docs/design.md §7).
type CohortState string

// The states of a cohort.
const (
	// CohortOpen admits children up to its width.
	CohortOpen CohortState = "open"
	// CohortFrozen admits nothing new; in-flight children may finish.
	CohortFrozen CohortState = "frozen"
	// CohortClosing has its cutoff fixed and is being reduced.
	CohortClosing CohortState = "closing"
	// CohortClosed has its completion marker.
	CohortClosed CohortState = "closed"
)

// Cohort is the batch of children one visit of a fan-out node started.
// It holds counters and the reduction's state; each child's item and
// result is a CohortItem.
type Cohort struct {
	RunID string `json:"run_id"`
	Node  string `json:"node"`
	Visit int    `json:"visit"`
	Items int    `json:"items"` // number of items
	// Task is the parent's step task, which children wake.
	Task string `json:"task"`
	// Need is how many children must mature for a sufficient close.
	Need     int         `json:"need"`
	State    CohortState `json:"state"`
	Deadline time.Time   `json:"deadline,omitzero"` // the fuse; zero: none
	FrozenAt time.Time   `json:"frozen_at,omitzero"`
	// Next is the index of the next item to admit.
	Next      int `json:"next"`
	InFlight  int `json:"in_flight"`
	Published int `json:"published"`
	Mature    int `json:"mature"`
	Failed    int `json:"failed"`
	Stopped   int `json:"stopped"`
	Late      int `json:"late"`
	// Fresh lists items that ended since the parent last judged them.
	Fresh []int `json:"fresh,omitempty"`
	// ChildBudget is the budget each child run of a flow fan-out reserves
	// out of the parent's remainder when admitted, fixed when the cohort
	// starts (0: the children have no budget).
	ChildBudget int64 `json:"child_budget,omitempty"`
	// Unknown lists the items stopped or failed while a call that is not
	// idempotent had started and its result was never recorded: their
	// outcome is unknown (E_OUTCOME_UNKNOWN).
	Unknown []int `json:"unknown,omitempty"`
	// Asking lists the items in flight whose call's outcome is unknown on
	// a fan-out that says on_unknown = "ask": each waits for a person to
	// resolve it (the item's Error says why), and the parent's step opens
	// and applies its wait.
	Asking []int `json:"asking,omitempty"`
	// Exhausted lists the items in flight whose task used up its tries on
	// a fan-out that says on_exhausted = "park": each task is
	// dead-lettered and parked until a redrive sends it back.
	Exhausted []int `json:"exhausted,omitempty"`
	// Cutoff is fixed when closing starts: results after it are late.
	Cutoff     time.Time `json:"cutoff,omitzero"`
	Sufficient bool      `json:"sufficient"`
	Fuse       bool      `json:"fuse,omitempty"` // closed by the deadline fuse
	// Canonical is the reduction's canonical state: the published results
	// in item order; Derived is what reduce made of them.
	Canonical json.RawMessage `json:"canonical,omitempty"`
	Derived   json.RawMessage `json:"derived,omitempty"`
	// Marker is the only fact of completion, written last with Cutoff.
	Marker    bool      `json:"marker"`
	CreatedAt time.Time `json:"created_at"`
}

// ItemState is where one child of a cohort is.
type ItemState string

// The states of a cohort item.
const (
	ItemPending   ItemState = "pending"   // not admitted yet
	ItemAdmitted  ItemState = "admitted"  // in flight
	ItemPublished ItemState = "published" // finished ok before the cutoff
	ItemFailed    ItemState = "failed"    // finished with an error
	ItemStopped   ItemState = "stopped"   // stopped after the grace period
	ItemLate      ItemState = "late"      // finished after the cutoff
)

// CohortItem is one item of a cohort and what its child made of it.
type CohortItem struct {
	RunID string          `json:"run_id"`
	Node  string          `json:"node"`
	Visit int             `json:"visit"`
	Index int             `json:"index"`
	Value json.RawMessage `json:"value"`
	// Input is what the child was given (args(ctx, item)), set at
	// admission.
	Input  json.RawMessage `json:"input,omitempty"`
	State  ItemState       `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RunError       `json:"error,omitempty"`
	Mature bool            `json:"mature,omitempty"`
	// Child is the child run of a subflow fan-out, or the task of a tool
	// fan-out.
	Child string    `json:"child,omitempty"`
	At    time.Time `json:"at,omitzero"` // when it ended
	// Deadline is when a child run of a fan-out with a timeout must have
	// ended; past it the parent cancels the child and the item fails
	// with E_CHILD_TIMEOUT. Zero: no timeout.
	Deadline time.Time `json:"deadline,omitzero"`
}

// CohortRef points from a child run to the cohort item it works for.
type CohortRef struct {
	Node  string `json:"node"`
	Visit int    `json:"visit"`
	Item  int    `json:"item"`
}
