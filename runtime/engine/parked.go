package engine

import (
	"context"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// splitParked splits the unleased tasks into those ready now and those
// parked until a wake: a run waiting for a decision is not queued. On a
// read failure all count as queued, as the store's own count says.
func splitParked(ctx context.Context, st store.Store, now time.Time, unleased int) (ready, parked int) {
	if unleased == 0 {
		return 0, 0
	}
	err := st.View(ctx, func(tx store.Tx) error {
		ts, err := tx.TaskListReady(now, unleased)
		ready = len(ts)
		return err
	})
	if err != nil || ready > unleased {
		return unleased, 0
	}
	return ready, unleased - ready
}
