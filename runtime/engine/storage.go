package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/weirhq/weir/runtime/engine/internal/storage"
	"github.com/weirhq/weir/runtime/store"
)

// storageUse is what each owner stores, as the storage service last
// measured it (internal/storage); nil while no owner has a quota.
type storageUse struct {
	mu   sync.Mutex
	used map[string]int64
	at   time.Time
}

func (u *storageUse) set(used map[string]int64, at time.Time) {
	u.mu.Lock()
	u.used, u.at = used, at
	u.mu.Unlock()
}

func (u *storageUse) of(owner string) (int64, time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.used[owner], u.at
}

// checkStorage refuses owner's new work while what it stores is at its
// share's storage quota.
func (d *ownerDoor) checkStorage(owner string, share OwnerShare) error {
	if share.StorageBytes <= 0 {
		return nil
	}
	used, at := d.storage.of(owner)
	if used < share.StorageBytes {
		return nil
	}
	d.stats.refused(CodeOwnerQuota)
	err := protocolErr(CodeOwnerQuota, "owner %q stores %s (measured %s): its storage quota is %s; its ended runs leave the store after the retention, and their space is counted free at the next measure",
		owner, Bytes(used), at.UTC().Format(time.RFC3339), Bytes(share.StorageBytes))
	err.RetryAfter = storage.Interval
	return err
}

// storageHost is the engine's side of the storage service.
type storageHost struct{ e *Engine }

func (h storageHost) Needed() bool {
	cfg := h.e.cfg.Load()
	if cfg.DefaultOwner.StorageBytes > 0 {
		return true
	}
	for _, s := range cfg.Owners {
		if s.StorageBytes > 0 {
			return true
		}
	}
	return false
}

// measurePage is how many runs one read of a pass takes.
const measurePage = 1000

// Measure sums, per owner, the size of its run records (their input,
// output and error with the rest of the record) and of its kept events'
// payloads, a page of runs per read.
func (h storageHost) Measure(ctx context.Context) (map[string]int64, error) {
	used := map[string]int64{}
	after := ""
	for {
		var runs []*store.Run
		if err := h.e.st.View(ctx, func(tx store.Tx) error {
			var err error
			runs, err = tx.RunList(store.RunListParams{After: after, Limit: measurePage})
			return err
		}); err != nil {
			return nil, err
		}
		for _, r := range runs {
			b, err := json.Marshal(r)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", r.ID, err)
			}
			used[r.Owner] += int64(len(b))
		}
		if len(runs) < measurePage {
			break
		}
		after = runs[len(runs)-1].ID
	}
	for owner := range used {
		if err := h.measureEvents(ctx, owner, used); err != nil {
			return nil, err
		}
	}
	return used, nil
}

func (h storageHost) measureEvents(ctx context.Context, owner string, used map[string]int64) error {
	var after uint64
	for {
		var evs []*store.OwnerEvent
		if err := h.e.st.View(ctx, func(tx store.Tx) error {
			var err error
			evs, err = tx.OwnerEventList(store.OwnerEventListParams{Owner: owner, AfterSeq: after, Limit: measurePage})
			return err
		}); err != nil {
			return err
		}
		for _, ev := range evs {
			used[owner] += int64(len(ev.Payload))
		}
		if len(evs) < measurePage {
			return nil
		}
		after = evs[len(evs)-1].Seq
	}
}

func (h storageHost) Publish(used map[string]int64) { h.e.owners.storage.set(used, h.e.clock.Now()) }

func (h storageHost) Error(msg string, args ...any) { h.e.log.Error(msg, args...) }
