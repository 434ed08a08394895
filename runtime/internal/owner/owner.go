// Package owner carries the owner of a piece of work on its context and
// shares a bounded resource fairly between owners.
//
// An owner is the unit of fairness (docs/design.md §2.6, §3): the owner
// string the engine stores on a run (a uid's owner name, a token's name).
// The engine puts it on the context of the work it hands to the sandbox
// and the plugin host (WithOwner); they read it back (From) and queue the
// work by owner in Slots, so that one owner's slow or hostile work waits
// behind its own and not behind everyone's.
package owner

import "context"

type ctxKey struct{}

// WithOwner returns ctx carrying name as the owner of the work done under
// it.
func WithOwner(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, ctxKey{}, name)
}

// From returns the owner ctx carries, or "" when it carries none. ""
// is an owner like any other: work of unknown owner shares one owner's
// share, so it can neither starve nor be starved by a named owner.
func From(ctx context.Context) string {
	name, _ := ctx.Value(ctxKey{}).(string)
	return name
}

// BelowShare says whether an owner holding held of slots is below its
// share: slots × weight ÷ total, where total is the weight of every owner
// holding a slot, this one included (counted once even when it holds
// none yet). It is the rule for the spare slots (Slots here, the engine's
// ledger): a spare goes to an owner below its share, so an owner that
// arrives, or needs a second slot, while another owner's long work holds
// every slot does not wait for that work to end, while the owner over its
// share waits for its own slots to free. An owner holding none is always
// below its share.
func BelowShare(held, slots, weight, total int) bool {
	return held*max(total, 1) < slots*max(weight, 1)
}
