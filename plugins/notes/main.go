// Command notes is weir's note store: a small durable key-value store for
// agents' memory, one file per note in the plugin's state directory.
// notes.put and notes.delete are idempotent: a retry of the same logical
// call (same idempotency key) returns the first answer and does not apply
// again, so a late retry cannot overwrite a newer note.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/dedupe"
)

// note is one stored note, the content of one file.
type note struct {
	Key       string    `json:"key"`
	Text      string    `json:"text"`
	UpdatedAt time.Time `json:"updated_at"`
}

const keySchema = `{"type":"string","minLength":1,"maxLength":512}`

// configSchema is the plugin's config section: it reads none, so any key
// in a notes block is refused with its file:line.
const configSchema = `{"type":"object","additionalProperties":false}`

func main() {
	sdk.ServeWith(sdk.Options{Name: "notes", ConfigSchema: configSchema,
		Tools: func(json.RawMessage) ([]sdk.Tool, error) { return tools(), nil }})
}

func tools() []sdk.Tool {
	return []sdk.Tool{
		{
			Name:        "notes.put",
			Description: "Store text under key, replacing any note there.",
			Effect:      sdk.EffectIdempotent,
			InputSchema: `{"type":"object","required":["key","text"],"additionalProperties":false,"properties":{"key":` + keySchema + `,"text":{"type":"string"}}}`,
			Run:         put,
		},
		{
			Name:        "notes.get",
			Description: "Read the note under key; found is false if there is none.",
			Effect:      sdk.EffectRead,
			InputSchema: `{"type":"object","required":["key"],"additionalProperties":false,"properties":{"key":` + keySchema + `}}`,
			Run:         get,
		},
		{
			Name:        "notes.list",
			Description: "List the keys that start with prefix, sorted.",
			Effect:      sdk.EffectRead,
			InputSchema: `{"type":"object","additionalProperties":false,"properties":{"prefix":{"type":"string"}}}`,
			Run:         list,
		},
		{
			Name:        "notes.delete",
			Description: "Delete the note under key; deleted is false if there was none.",
			Effect:      sdk.EffectIdempotent,
			InputSchema: `{"type":"object","required":["key"],"additionalProperties":false,"properties":{"key":` + keySchema + `}}`,
			Run:         del,
		},
	}
}

// store is the process's view of the state directory; mu orders the
// writes of different keys' files against list.
var (
	mu        sync.Mutex
	storeOnce sync.Once
	applied   *dedupe.Store
)

// decode reads the call's input into in and returns the notes directory
// of the call's state.
func decode(call *sdk.Call, in any) (string, error) {
	if err := call.Decode(in); err != nil {
		return "", err
	}
	return notesDir(call)
}

func notesDir(call *sdk.Call) (string, error) {
	if call.StateDir == "" {
		return "", errors.New("notes needs a state directory")
	}
	storeOnce.Do(func() {
		applied = &dedupe.Store{Dir: filepath.Join(call.StateDir, "dedupe")}
	})
	dir := filepath.Join(call.StateDir, "notes")
	return dir, os.MkdirAll(dir, 0o700)
}

// fileOf names a note's file by the hash of its key: any string is a key,
// and a file name must stay short and safe.
func fileOf(dir, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(dir, hex.EncodeToString(sum[:])+".json")
}

func fingerprint(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

func put(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct{ Key, Text string }
	dir, err := decode(call, &in)
	if err != nil {
		return nil, err
	}
	out, _, err := applied.Do(call.IdempotencyKey, fingerprint("put", in.Key, in.Text), func() (any, error) {
		n := note{Key: in.Key, Text: in.Text, UpdatedAt: time.Now().UTC()}
		b, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if err := dedupe.WriteFileAtomic(fileOf(dir, in.Key), b, 0o600); err != nil {
			return nil, sdk.Retryable(err)
		}
		return map[string]any{"key": n.Key, "updated_at": n.UpdatedAt}, nil
	})
	return keyReused(out, err)
}

func get(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct{ Key string }
	dir, err := decode(call, &in)
	if err != nil {
		return nil, err
	}
	n, err := readNote(fileOf(dir, in.Key))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{"key": in.Key, "found": false}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"key": n.Key, "found": true, "text": n.Text, "updated_at": n.UpdatedAt}, nil
}

func list(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct{ Prefix string }
	dir, err := decode(call, &in)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	keys := []string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		n, err := readNote(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(n.Key, in.Prefix) {
			keys = append(keys, n.Key)
		}
	}
	sort.Strings(keys)
	return map[string]any{"keys": keys}, nil
}

func del(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct{ Key string }
	dir, err := decode(call, &in)
	if err != nil {
		return nil, err
	}
	out, _, err := applied.Do(call.IdempotencyKey, fingerprint("delete", in.Key), func() (any, error) {
		mu.Lock()
		defer mu.Unlock()
		err := os.Remove(fileOf(dir, in.Key))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, sdk.Retryable(err)
		}
		return map[string]any{"key": in.Key, "deleted": err == nil}, nil
	})
	return keyReused(out, err)
}

func keyReused(out json.RawMessage, err error) (any, error) {
	if errors.Is(err, dedupe.ErrKeyReused) {
		return nil, fmt.Errorf("notes: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func readNote(path string) (note, error) {
	var n note
	b, err := os.ReadFile(path)
	if err != nil {
		return n, err
	}
	if err := json.Unmarshal(b, &n); err != nil {
		return n, fmt.Errorf("note file %s: %w", filepath.Base(path), err)
	}
	return n, nil
}
