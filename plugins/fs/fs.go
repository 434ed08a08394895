package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/dedupe"
)

// config is the plugin's section of weir's configuration.
type config struct {
	// Root is the directory the tools are confined to.
	Root string `json:"root"`
	// MaxReadBytes bounds fs.read (default 1 MiB).
	MaxReadBytes int64 `json:"max_read_bytes"`
	// MaxWriteBytes bounds fs.write's content (default 1 MiB).
	MaxWriteBytes int64 `json:"max_write_bytes"`
	// MaxEntries bounds fs.list (default 10000).
	MaxEntries int `json:"max_entries"`
}

func loadConfig(call *sdk.Call) (config, error) {
	c := config{MaxReadBytes: 1 << 20, MaxWriteBytes: 1 << 20, MaxEntries: 10000}
	if err := call.DecodeConfig(&c); err != nil {
		return c, err
	}
	if c.Root == "" {
		if call.StateDir == "" {
			return c, errors.New("fs has no root: configure one, or run it under weir, which gives it a state directory")
		}
		c.Root = filepath.Join(call.StateDir, "files")
		if err := os.MkdirAll(c.Root, 0o755); err != nil {
			return c, err
		}
	}
	return c, nil
}

// openRoot opens the configured root; every access goes through it.
func openRoot(call *sdk.Call) (*os.Root, config, error) {
	c, err := loadConfig(call)
	if err != nil {
		return nil, c, err
	}
	r, err := os.OpenRoot(c.Root)
	if err != nil {
		return nil, c, fmt.Errorf("opening the root: %w", err)
	}
	return r, c, nil
}

// clean checks a path given by the caller and returns it in the form
// os.Root takes.
func clean(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be relative to the root", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q escapes the root", p)
	}
	return c, nil
}

// explain turns os.Root's errors into messages for flow authors.
func explain(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file or directory", p)
	case strings.Contains(err.Error(), "escapes"):
		return fmt.Errorf("path %q escapes the root (through .. or a symbolic link)", p)
	}
	return err
}

func tools() []sdk.Tool {
	return []sdk.Tool{
		{
			Name:        "fs.read",
			Description: "Read a file under the root. Text comes back as utf-8, anything else as base64.",
			Effect:      sdk.EffectRead,
			InputSchema: `{"type":"object","required":["path"],"additionalProperties":false,"properties":{"path":{"type":"string","minLength":1}}}`,
			OutputSchema: `{"type":"object","properties":{"path":{"type":"string"},"size":{"type":"integer"},"sha256":{"type":"string"},
				"content":{"type":"string"},"encoding":{"enum":["utf-8","base64"]}}}`,
			Run: read,
		},
		{
			Name:        "fs.list",
			Description: "List a directory under the root (default: the root itself).",
			Effect:      sdk.EffectRead,
			InputSchema: `{"type":"object","additionalProperties":false,"properties":{"path":{"type":"string"}}}`,
			Run:         list,
		},
		{
			Name:        "fs.write",
			Description: "Write a file under the root, atomically, creating parent directories. Idempotent on (path, content hash) through the idempotency key.",
			Effect:      sdk.EffectIdempotent,
			InputSchema: `{"type":"object","required":["path","content"],"additionalProperties":false,"properties":{
				"path":{"type":"string","minLength":1},"content":{"type":"string"},"encoding":{"enum":["utf-8","base64"]}}}`,
			Run: write,
		},
	}
}

// openInput decodes the call's {"path": ...}, confines it to the root and
// opens it: the start of read and list. The caller closes the file.
func openInput(call *sdk.Call) (f *os.File, in struct{ Path string }, p string, c config, err error) {
	if err = call.Decode(&in); err != nil {
		return nil, in, "", c, err
	}
	if p, err = clean(in.Path); err != nil {
		return nil, in, "", c, err
	}
	root, c, err := openRoot(call)
	if err != nil {
		return nil, in, "", c, err
	}
	defer root.Close()
	if f, err = root.Open(p); err != nil {
		return nil, in, "", c, explain(in.Path, err)
	}
	return f, in, p, c, nil
}

func read(ctx context.Context, call *sdk.Call) (any, error) {
	f, in, p, c, err := openInput(call)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", in.Path)
	}
	b, err := io.ReadAll(io.LimitReader(f, c.MaxReadBytes+1))
	if err != nil {
		return nil, sdk.Retryable(err)
	}
	if int64(len(b)) > c.MaxReadBytes {
		return nil, fmt.Errorf("%s is larger than max_read_bytes (%d)", in.Path, c.MaxReadBytes)
	}
	sum := sha256.Sum256(b)
	out := map[string]any{"path": p, "size": len(b), "sha256": hex.EncodeToString(sum[:])}
	if utf8.Valid(b) {
		out["content"], out["encoding"] = string(b), "utf-8"
	} else {
		out["content"], out["encoding"] = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return out, nil
}

type entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

func list(ctx context.Context, call *sdk.Call) (any, error) {
	d, in, p, c, err := openInput(call)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	des, err := d.ReadDir(c.MaxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, explain(in.Path, err)
	}
	truncated := len(des) > c.MaxEntries
	if truncated {
		des = des[:c.MaxEntries]
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		e := entry{Name: de.Name(), Type: "other"}
		switch t := de.Type(); {
		case t.IsDir():
			e.Type = "dir"
		case t.IsRegular():
			e.Type = "file"
		case t&fs.ModeSymlink != 0:
			e.Type = "symlink"
		}
		if info, err := de.Info(); err == nil && e.Type == "file" {
			e.Size = info.Size()
		}
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return map[string]any{"path": p, "entries": entries, "truncated": truncated}, nil
}

var (
	writesOnce sync.Once
	writes     *dedupe.Store
)

// writeStore is fs.write's dedupe store, in the state directory (which is
// the same for every call of one process).
func writeStore(stateDir string) *dedupe.Store {
	writesOnce.Do(func() {
		writes = &dedupe.Store{Dir: filepath.Join(stateDir, "dedupe", "fs.write")}
	})
	return writes
}

func write(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct {
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	}
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	p, err := clean(in.Path)
	if err != nil {
		return nil, err
	}
	if p == "." {
		return nil, errors.New("fs.write needs a file path")
	}
	data := []byte(in.Content)
	if in.Encoding == "base64" {
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, fmt.Errorf("content is not base64: %w", err)
		}
	}
	root, c, err := openRoot(call)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if int64(len(data)) > c.MaxWriteBytes {
		return nil, fmt.Errorf("content of %d bytes is larger than max_write_bytes (%d)", len(data), c.MaxWriteBytes)
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	key := call.IdempotencyKey
	if call.StateDir == "" {
		key = "" // nowhere to remember it: no dedupe
	}
	out, replayed, err := writeStore(call.StateDir).Do(key, p+"\x00"+hexSum, func() (any, error) {
		if err := writeAtomic(root, p, data); err != nil {
			return nil, explain(in.Path, err)
		}
		return map[string]any{"path": p, "size": len(data), "sha256": hexSum}, nil
	})
	if errors.Is(err, dedupe.ErrKeyReused) {
		return nil, fmt.Errorf("fs.write: %w (key %q)", err, call.IdempotencyKey)
	}
	if err != nil {
		return nil, err
	}
	if replayed {
		call.Logger().Debug("replayed a write by its idempotency key", "path", p)
	}
	return out, nil
}

// writeAtomic writes data to p under root through a temporary file in the
// same directory, so that a reader never sees half a file.
func writeAtomic(root *os.Root, p string, data []byte) error {
	dir := path.Dir(p)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".fs-write-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, p)
	}
	if err != nil {
		_ = root.Remove(tmp)
	}
	return err
}
