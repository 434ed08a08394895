package engine

import (
	"context"

	"github.com/weirhq/weir/runtime/store"
)

// Ops are the operations people need after something went wrong (DESIGN
// §12, one shape for operations on runs): dead letters, resolving unknown
// outcomes, redrive and fork. Each is owner-only, audited, journaled on
// the run it acts on and done once; they live on their own type so the
// engine's own surface stays small.
type Ops struct{ e *Engine }

// Ops returns the engine's recovery operations.
func (e *Engine) Ops() *Ops { return &Ops{e: e} }

// DeadLetters lists owner's dead letters.
func (o *Ops) DeadLetters(ctx context.Context, owner string, limit int) ([]*store.DeadLetter, error) {
	var out []*store.DeadLetter
	err := o.e.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.DeadLetterList(store.DeadLetterListParams{Owner: owner, Limit: limit})
		return err
	})
	if err != nil {
		return nil, o.e.admission.readFailed(err)
	}
	return out, nil
}
