package engine

import (
	"context"

	"github.com/weirhq/weir/runtime/store"
)

// splitParked splits the unleased tasks into those ready now and those
// parked until a wake: a run waiting for a decision is not queued. On a
// read failure all count as queued, as the store's own count says.
func (e *Engine) splitParked(ctx context.Context, unleased int) (ready, parked int) {
	if unleased == 0 {
		return 0, 0
	}
	err := e.st.View(ctx, func(tx store.Tx) error {
		ts, err := tx.TaskListReady(e.now(), unleased)
		ready = len(ts)
		return err
	})
	if err != nil || ready > unleased {
		return unleased, 0
	}
	return ready, unleased - ready
}
