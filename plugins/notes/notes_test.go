package main

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("notes")) }

type got struct {
	Key     string
	Found   bool
	Text    string
	Deleted bool
	Keys    []string
}

func TestPutGetListDelete(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "notes", "")
	p.MustCall(t, "notes.put", `{"key":"user/ada","text":"likes tea"}`, "p1", nil)
	p.MustCall(t, "notes.put", `{"key":"user/bob","text":"likes coffee"}`, "p2", nil)
	p.MustCall(t, "notes.put", `{"key":"topic/x","text":"?"}`, "p3", nil)
	var g got
	p.MustCall(t, "notes.get", `{"key":"user/ada"}`, "", &g)
	if !g.Found || g.Text != "likes tea" {
		t.Fatalf("get answered %+v", g)
	}
	g = got{}
	p.MustCall(t, "notes.list", `{"prefix":"user/"}`, "", &g)
	if strings.Join(g.Keys, ",") != "user/ada,user/bob" {
		t.Fatalf("list answered %v", g.Keys)
	}
	g = got{}
	p.MustCall(t, "notes.delete", `{"key":"user/ada"}`, "d1", &g)
	if !g.Deleted {
		t.Fatalf("delete answered %+v", g)
	}
	g = got{}
	p.MustCall(t, "notes.get", `{"key":"user/ada"}`, "", &g)
	if g.Found {
		t.Fatalf("deleted note still found: %+v", g)
	}
}

func TestLateRetryDoesNotOverwrite(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "notes", "")
	p.MustCall(t, "notes.put", `{"key":"k","text":"old"}`, "call-1", nil)
	p.MustCall(t, "notes.put", `{"key":"k","text":"new"}`, "call-2", nil)
	// A retry of call-1 arriving late replays its answer, it does not
	// write "old" again.
	p.MustCall(t, "notes.put", `{"key":"k","text":"old"}`, "call-1", nil)
	var g got
	p.MustCall(t, "notes.get", `{"key":"k"}`, "", &g)
	if g.Text != "new" {
		t.Fatalf("note is %q after a late retry, want new", g.Text)
	}
	plugintest.WantKind(t, p.Call("notes.put", `{"key":"k","text":"other"}`, "call-1", nil), host.KindPermanent)
}

func TestNotesSurviveRestart(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "notes", "")
	p.MustCall(t, "notes.put", `{"key":"durable","text":"yes"}`, "k", nil)
	if err := p.Host.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(host.Config{PluginsDir: p.PluginsDir, DataDir: p.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p2 := &plugintest.Plugin{Host: h, DataDir: p.DataDir, StateDir: p.StateDir}
	var g got
	p2.MustCall(t, "notes.get", `{"key":"durable"}`, "", &g)
	if g.Text != "yes" {
		t.Fatalf("after a restart the note is %+v", g)
	}
}

func TestSchemaRefusesBadKeys(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "notes", "")
	for _, in := range []string{`{"key":"","text":"x"}`, `{"key":"k"}`, `{"key":"` + strings.Repeat("k", 513) + `","text":"x"}`} {
		plugintest.WantKind(t, p.Call("notes.put", in, "", nil), host.KindSchema)
	}
}
