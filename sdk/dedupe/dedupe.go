// Package dedupe keeps the promise of an idempotent tool: the output of a
// call is stored under its idempotency key in the plugin's state directory,
// so a retry of the same logical call returns that output instead of doing
// the work again, even after the plugin (or weir) restarted.
//
// weir passes the same sdk.Call.IdempotencyKey on every attempt of one
// logical call; a tool that declares Idempotent must not act twice for one
// key. A Store per tool, under Call.StateDir, is all it takes:
//
//	store := &dedupe.Store{Dir: filepath.Join(call.StateDir, "dedupe", "memo.put")}
//	out, replayed, err := store.Do(call.IdempotencyKey, fingerprint, func() (any, error) {
//		return put(in) // runs at most once per key, unless it fails
//	})
//
// weir's first-party plugins (fs.write, notes.put) use it; vendors should
// too. WriteFileAtomic is the crash-safe write the Store is built on, for a
// tool's other durable state.
package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Store keeps one record per idempotency key in Dir.
type Store struct {
	Dir string

	// locks serializes attempts of one key inside the process (striped:
	// the set of keys is unbounded).
	locks [64]sync.Mutex
}

// ErrKeyReused is returned when a key comes back with a different input:
// two logical calls cannot share a key, so neither result would be right.
var ErrKeyReused = errors.New("idempotency key reused for a different input")

type record struct {
	Fingerprint string          `json:"fingerprint"`
	Output      json.RawMessage `json:"output"`
}

// Do returns the stored output for key if there is one, else runs f and
// stores its output. fingerprint identifies the input (for example a hash
// of the path and content): the same key with another fingerprint fails
// with ErrKeyReused. An empty key runs f without dedupe. f's error is
// returned as is and nothing is stored, so the next attempt runs f again.
func (s *Store) Do(key, fingerprint string, f func() (any, error)) (json.RawMessage, bool, error) {
	if key == "" {
		out, err := f()
		if err != nil {
			return nil, false, err
		}
		b, err := json.Marshal(out)
		return b, false, err
	}
	sum := sha256.Sum256([]byte(key))
	name := hex.EncodeToString(sum[:])
	l := &s.locks[sum[0]%64]
	l.Lock()
	defer l.Unlock()
	path := filepath.Join(s.Dir, name+".json")
	if b, err := os.ReadFile(path); err == nil {
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, false, fmt.Errorf("dedupe record %s: %w", path, err)
		}
		if r.Fingerprint != fingerprint {
			return nil, false, ErrKeyReused
		}
		return r.Output, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	out, err := f()
	if err != nil {
		return nil, false, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, false, err
	}
	rec, err := json.Marshal(record{Fingerprint: fingerprint, Output: b})
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, false, err
	}
	if err := WriteFileAtomic(path, rec, 0o600); err != nil {
		return nil, false, err
	}
	return b, false, nil
}

// WriteFileAtomic replaces path with data so that a reader sees the old
// content or the new one, never a torn file, and the new one survives a
// crash once it returns: a temporary file in the same directory, synced,
// renamed over path, then the directory synced. The directory must exist.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
