package engine

import (
	"encoding/json"
	"fmt"

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
}

func newContinuation(entry string) *continuation {
	return &continuation{V: continuationVersion, Node: entry, Results: map[string]json.RawMessage{}}
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
