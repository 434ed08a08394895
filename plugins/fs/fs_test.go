package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("fs")) }

// start returns the plugin confined to a fresh root, and the root.
func start(t *testing.T) (*plugintest.Plugin, string) {
	t.Helper()
	root := t.TempDir()
	return plugintest.Start(t, "fs", `{"root":"`+root+`","max_read_bytes":64}`), root
}

func TestWriteReadList(t *testing.T) {
	t.Parallel()
	p, root := start(t)
	var w struct {
		Path   string
		Size   int
		SHA256 string
	}
	p.MustCall(t, "fs.write", `{"path":"notes/a.txt","content":"hello"}`, "w1", &w)
	if w.Path != "notes/a.txt" || w.Size != 5 || len(w.SHA256) != 64 {
		t.Fatalf("write answered %+v", w)
	}
	if b, err := os.ReadFile(filepath.Join(root, "notes", "a.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("file holds %q, %v", b, err)
	}
	var r struct{ Content, Encoding, SHA256 string }
	p.MustCall(t, "fs.read", `{"path":"notes/a.txt"}`, "", &r)
	if r.Content != "hello" || r.Encoding != "utf-8" || r.SHA256 != w.SHA256 {
		t.Fatalf("read answered %+v", r)
	}
	bin := base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe})
	p.MustCall(t, "fs.write", `{"path":"b.bin","content":"`+bin+`","encoding":"base64"}`, "w2", nil)
	p.MustCall(t, "fs.read", `{"path":"b.bin"}`, "", &r)
	if r.Encoding != "base64" || r.Content != bin {
		t.Fatalf("binary read answered %+v", r)
	}
	var l struct {
		Entries []entry
	}
	p.MustCall(t, "fs.list", `{}`, "", &l)
	if len(l.Entries) != 2 || l.Entries[0] != (entry{Name: "b.bin", Type: "file", Size: 3}) || l.Entries[1].Type != "dir" {
		t.Fatalf("list answered %+v", l)
	}
}

func TestWriteIsIdempotentOnKey(t *testing.T) {
	t.Parallel()
	p, root := start(t)
	p.MustCall(t, "fs.write", `{"path":"a.txt","content":"v1"}`, "k", nil)
	// Someone changes the file; a retry of the first write must not undo it.
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("changed since"), 0o644); err != nil {
		t.Fatal(err)
	}
	var w struct{ Size int }
	p.MustCall(t, "fs.write", `{"path":"a.txt","content":"v1"}`, "k", &w)
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(b) != "changed since" || w.Size != 2 {
		t.Fatalf("retry wrote again: file %q, answer %+v", b, w)
	}
	// The same key for another write is a caller's bug.
	err := p.Call("fs.write", `{"path":"a.txt","content":"v2"}`, "k", nil)
	plugintest.WantKind(t, err, host.KindPermanent)
	if !strings.Contains(err.Error(), "reused") {
		t.Fatalf("error %v", err)
	}
	// A new key is a new write.
	p.MustCall(t, "fs.write", `{"path":"a.txt","content":"v2"}`, "k2", nil)
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(b) != "v2" {
		t.Fatalf("file %q, want v2", b)
	}
}

func TestEscapesRefused(t *testing.T) {
	t.Parallel()
	p, root := start(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "secret-link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tool, input string }{
		{"fs.read", `{"path":"../secret"}`},
		{"fs.read", `{"path":"a/../../secret"}`},
		{"fs.read", `{"path":"/etc/passwd"}`},
		{"fs.read", `{"path":"link/secret"}`},
		{"fs.read", `{"path":"secret-link"}`},
		{"fs.list", `{"path":"link"}`},
		{"fs.list", `{"path":".."}`},
		{"fs.write", `{"path":"link/new","content":"x"}`},
		{"fs.write", `{"path":"../new","content":"x"}`},
	} {
		err := p.Call(c.tool, c.input, "esc-"+c.input, nil)
		plugintest.WantKind(t, err, host.KindPermanent)
		if !strings.Contains(err.Error(), "root") {
			t.Errorf("%s %s: %v does not say it left the root", c.tool, c.input, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); !os.IsNotExist(err) {
		t.Fatal("a write escaped the root")
	}
}

func TestLimitsAndMissingFiles(t *testing.T) {
	t.Parallel()
	p, root := start(t)
	if err := os.WriteFile(filepath.Join(root, "big"), []byte(strings.Repeat("x", 65)), 0o644); err != nil {
		t.Fatal(err)
	}
	err := p.Call("fs.read", `{"path":"big"}`, "", nil)
	plugintest.WantKind(t, err, host.KindPermanent)
	err = p.Call("fs.read", `{"path":"nope"}`, "", nil)
	plugintest.WantKind(t, err, host.KindPermanent)
	if !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("error %v", err)
	}
	plugintest.WantKind(t, p.Call("fs.read", `{}`, "", nil), host.KindSchema)
}

func TestDefaultRootIsInStateDir(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "fs", "")
	p.MustCall(t, "fs.write", `{"path":"x.txt","content":"x"}`, "k", nil)
	if b, err := os.ReadFile(filepath.Join(p.StateDir, "files", "x.txt")); err != nil || string(b) != "x" {
		t.Fatalf("default root: %q %v", b, err)
	}
}
