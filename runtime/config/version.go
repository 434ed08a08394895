package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weirhq/weir/runtime/store"
)

// MetaKey is the store's meta key holding the version and hash of the
// config the data directory last ran under.
const MetaKey = "config"

// metaRecordV1 is the format version of the MetaKey record written today;
// a record without one predates the field and is version 1. A newer one is
// refused rather than read by guess.
const metaRecordV1 = 1

type metaRecord struct {
	V       int    `json:"v,omitempty"`
	Version int64  `json:"version"`
	Hash    string `json:"hash"`
}

// Assign returns the version of the config with hash in st: the version
// in force if its hash is the same, otherwise the next version, recorded
// durably before Assign returns. Versions only grow, across restarts too,
// so a start event's version names one config content.
func Assign(ctx context.Context, st store.Store, hash string) (int64, error) {
	var version int64
	err := st.Update(ctx, func(tx store.Tx) error {
		var cur metaRecord
		b, err := tx.MetaGet(MetaKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(b, &cur); err != nil {
				return fmt.Errorf("config: the store's %q record is unreadable: %w", MetaKey, err)
			}
			if cur.V > metaRecordV1 {
				return fmt.Errorf("config: the store's %q record has format version %d, this weir reads version %d (was the data written by a newer weir?)",
					MetaKey, cur.V, metaRecordV1)
			}
		}
		if cur.Hash == hash && cur.Version > 0 {
			version = cur.Version
			return nil
		}
		version = cur.Version + 1
		nb, err := json.Marshal(metaRecord{V: metaRecordV1, Version: version, Hash: hash})
		if err != nil {
			return err
		}
		return tx.MetaPut(MetaKey, nb)
	})
	if err != nil {
		return 0, err
	}
	return version, nil
}
