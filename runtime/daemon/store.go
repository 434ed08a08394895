package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/pgstore"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// openStore opens the store u names: the PostgreSQL database (shared by a
// fleet of daemons if shared), or for "" the embedded store in dir,
// keeping minFree bytes free (refusing clearly if a daemon holds it).
func openStore(ctx context.Context, log hclog.Logger, dataDir, dir, u string, shared bool, minFree int64) (store.Store, error) {
	noSync, err := unsafeNoSync(log)
	if err != nil {
		return nil, err
	}
	if u != "" {
		if noSync {
			return nil, errors.New("WEIR_UNSAFE_NO_SYNC is for the embedded store; a PostgreSQL store's durability is the database's setting")
		}
		st, err := pgstore.Open(ctx, u, pgstore.Options{Logger: log.Named("store"), Shared: shared})
		if errors.Is(err, store.ErrLocked) {
			if shared {
				return nil, fmt.Errorf("%w: stop that daemon first, or run it with the store shared too", err)
			}
			return nil, fmt.Errorf("%w: stop it, use its commands (weir run ...), or run every daemon on the database with the store shared (a fleet: --shared or store { shared = true })", err)
		}
		if err == nil && shared {
			log.Info("store shared with a fleet of daemons", "store", storeurl.Redact(u))
		}
		return st, err
	}
	st, err := badgerstore.Open(dir, badgerstore.Options{Logger: log.Named("store"), MinFreeBytes: minFree, UnsafeNoSync: noSync})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("the data directory %s is in use by a running weir daemon: stop it, use its commands (weir run ...), or pass another --data", dataDir)
	}
	return st, err
}

// unsafeNoSync reads WEIR_UNSAFE_NO_SYNC: "1" opens the embedded store
// without syncing its commits, which loses acknowledged work on an OS
// crash or a power loss. It is for measuring what durability costs (the
// bench's "cost of durability" row), so it is an environment variable
// with no flag or config field, and the log says so at every start.
func unsafeNoSync(log hclog.Logger) (bool, error) {
	switch v := os.Getenv("WEIR_UNSAFE_NO_SYNC"); v {
	case "":
		return false, nil
	case "1":
		log.Warn("WEIR_UNSAFE_NO_SYNC=1: the store does not sync its commits; acknowledged runs and steps are LOST on an OS crash or power loss. For benchmarks only, never in production")
		return true, nil
	default:
		return false, fmt.Errorf("WEIR_UNSAFE_NO_SYNC=%q: only 1 (commits not synced, for benchmarks) or unset", v)
	}
}
