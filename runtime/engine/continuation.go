package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// continuationVersion is the encoding version written today. Decoding
// refuses versions it does not know instead of guessing.
const continuationVersion = 1

// continuation is a run's position in its graph: the node to run next, the
// results and errors of nodes run so far, visit counters, and the failed
// tries of the current node visit.
type continuation struct {
	V       int                        `json:"v"`
	Node    string                     `json:"node"` // "" once the graph is done
	Results map[string]json.RawMessage `json:"results"`
	Errors  map[string]*store.RunError `json:"errors,omitempty"`
	Visits  map[string]int             `json:"visits,omitempty"`
	Tries   int                        `json:"tries,omitempty"`
	// Last is the id of the last node that produced a result, whose result
	// is the run's output when the flow declares no output callable.
	Last string `json:"last,omitempty"`
	// Waits holds the state of the waits of whole nodes (a wait node, a
	// subflow's deadline), by node.
	Waits map[string]*waitState `json:"waits,omitempty"`
	// Approvals holds the approval waits of tool calls an agent proposed,
	// by wait id: one node may have several open at once.
	Approvals map[string]*waitState `json:"approvals,omitempty"`
	// Decided remembers the latest waits decided and consumed (at most
	// maxDecidedWaits), so a second decision is told E_ALREADY_DECIDED
	// after the run went on.
	Decided []decidedWait `json:"decided,omitempty"`
	// Exhausted numbers the exhausted waits of each node's current visit
	// (exhaustCount), so a wait id is never reused after a redrive.
	Exhausted map[string]exhaustCount `json:"exhausted,omitempty"`
	// Unknown numbers the unknown waits of each node's current visit
	// likewise, so a wait id is never reused after a resolve.
	Unknown map[string]exhaustCount `json:"unknown,omitempty"`
	// Runaway is each agent node's runaway guard in its current visit
	// (runawayCount): its waits numbered, and the turns a person resumed
	// the loop past.
	Runaway map[string]runawayCount `json:"runaway,omitempty"`
	// Budget numbers the budget waits of each agent node's current visit
	// likewise.
	Budget map[string]exhaustCount `json:"budget,omitempty"`
	// ModelWait is the model turn whose wait for its model's limits the
	// timeline already tells (agentadmit.go): a turn that waits again is
	// not journaled again.
	ModelWait string `json:"model_wait,omitempty"`
	// TurnRetries are the failed tries of the model turn in progress and
	// the tokens they reported (agentadmit.go), journaled with the turn
	// once it answers.
	TurnRetries *turnRetries `json:"turn_retries,omitempty"`
}

// waitState is a wait in progress (docs/design.md §11, one wait model): its
// id and kind, what the decider is shown, since when, its deadline and,
// once given, the decision. A decision is recorded once; the worker
// consumes it. Records written before the wait model carry only Until and
// Decision; the id, kind and node are derived from the key and the task.
type waitState struct {
	ID    string    `json:"id,omitempty"`
	Kind  string    `json:"kind,omitempty"`
	Node  string    `json:"node,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until"`
	// Shown is what the decider is shown: a wait node's request, or the
	// call an agent proposed ({tool, arguments}).
	Shown json.RawMessage `json:"shown,omitempty"`
	// Visit and Call place an approval's proposed call: the agent's
	// visit, and [turn, call] in its turns.
	Visit    int       `json:"visit,omitempty"`
	Call     []int     `json:"call,omitempty"`
	Decision *decision `json:"decision,omitempty"`
	// Expires says an approval's Until is its own approval_ttl, not the
	// loop's deadline: past it the call is rejected (E_APPROVAL_EXPIRED)
	// and the loop goes on.
	Expires bool `json:"expires,omitempty"`
	// Event is what a wait for an event waits for (kind event).
	Event *eventWait `json:"event,omitempty"`
}

// decidedWait is a decided wait the run has gone past.
type decidedWait struct {
	ID       string    `json:"id"`
	Node     string    `json:"node"`
	Approved bool      `json:"approved"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	// Expired: nobody decided it within its approval_ttl.
	Expired bool `json:"expired,omitempty"`
}

// maxDecidedWaits bounds Decided: a run looping over a wait node keeps
// the latest decisions only, so its continuation does not grow.
const maxDecidedWaits = 32

// leaving drops the waits of node when the run leaves it: a visit that
// ended (answered, failed, timed out) no longer waits for them.
func (c *continuation) leaving(node string) {
	delete(c.Waits, node)
	for id, ws := range c.Approvals {
		if ws.Node == node {
			c.consumed(ws)
			delete(c.Approvals, id)
		}
	}
}

// consumed records that the decided wait ws was acted on.
func (c *continuation) consumed(ws *waitState) {
	if ws == nil || ws.Decision == nil || ws.ID == "" {
		return
	}
	c.Decided = append(c.Decided, decidedWait{ID: ws.ID, Node: ws.Node, Approved: ws.Decision.Approved, By: ws.Decision.By, At: ws.Decision.At, Expired: ws.Decision.Expired})
	if n := len(c.Decided); n > maxDecidedWaits {
		c.Decided = append([]decidedWait(nil), c.Decided[n-maxDecidedWaits:]...)
	}
}

// decision is an approval or a rejection of a wait. On an agent's
// approval, an approval with Arguments is an edit (the call runs with
// them, canonical and checked against the tool's input schema), and one
// with Respond answers the call with Result in the tool's place.
type decision struct {
	Approved  bool            `json:"approved"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Respond   bool            `json:"respond,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	By        string          `json:"by"`
	At        time.Time       `json:"at"`
	// Expired marks the rejection the engine gave an approval nobody
	// decided within its approval_ttl.
	Expired bool `json:"expired,omitempty"`
}

func newContinuation(entry string) *continuation {
	// The entry node is visited once by starting there.
	return &continuation{V: continuationVersion, Node: entry, Results: map[string]json.RawMessage{}, Visits: map[string]int{entry: 1}}
}

func encodeContinuation(c *continuation) []byte { return mustJSON(c) }

// readContinuation reads run runID's continuation in a transaction of
// its own.
func readContinuation(ctx context.Context, st store.Store, runID string) ([]byte, error) {
	var raw []byte
	err := st.View(ctx, func(tx store.Tx) error {
		var err error
		raw, err = tx.ContinuationGet(runID)
		return err
	})
	return raw, err
}

// decodeContinuation reads a stored continuation, refusing unknown
// versions and malformed data with an error (never a panic).
func decodeContinuation(b []byte) (*continuation, error) {
	var c continuation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("continuation: %w", err)
	}
	if c.V != continuationVersion {
		return nil, fmt.Errorf("continuation: unknown encoding version %d (this weir reads %d)", c.V, continuationVersion)
	}
	if c.Results == nil {
		c.Results = map[string]json.RawMessage{}
	}
	return &c, nil
}
