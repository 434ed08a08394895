package engine

import (
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
	// Waits holds the state of human waits the run is parked on, by node.
	Waits map[string]*waitState `json:"waits,omitempty"`
}

// waitState is a human wait in progress: its deadline and, once given, the
// decision. A decision is recorded once; the worker consumes it.
type waitState struct {
	Until    time.Time `json:"until"`
	Decision *decision `json:"decision,omitempty"`
}

// decision is an approval or a rejection of a wait.
type decision struct {
	Approved bool            `json:"approved"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	By       string          `json:"by"`
	At       time.Time       `json:"at"`
}

func newContinuation(entry string) *continuation {
	// The entry node is visited once by starting there.
	return &continuation{V: continuationVersion, Node: entry, Results: map[string]json.RawMessage{}, Visits: map[string]int{entry: 1}}
}

func encodeContinuation(c *continuation) []byte { return mustJSON(c) }

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
