package host

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/sdk/chat"
	"github.com/weirhq/weir/sdk/wire"
)

// TestManifestFromWireModelsAndSchema: a manifest's contract, models and
// config schema are taken as declared, and their limits hold.
func TestManifestFromWireModelsAndSchema(t *testing.T) {
	t.Parallel()
	good := func() *wire.ManifestResponse {
		return &wire.ManifestResponse{ProtocolVersion: wire.ProtocolVersion, ConfigSchema: `{"type":"object"}`,
			Tools: []*wire.ToolSpec{{Name: "m.chat", Contract: chat.Contract, Models: []*wire.ModelSpec{
				{Alias: "small", MaxTokens: 1024, InputCost: 100, OutputCost: 400}, {Alias: "big"}}}}}
	}
	m, err := manifestFromWire("m", "sum", good())
	if err != nil {
		t.Fatal(err)
	}
	if string(m.ConfigSchema) != `{"type":"object"}` {
		t.Errorf("config schema = %s", m.ConfigSchema)
	}
	info := toolInfo(m.Tools[0])
	want := []flows.ModelInfo{{Alias: "small", MaxTokens: 1024, InputCost: 100, OutputCost: 400}, {Alias: "big"}}
	if !info.Chat || !reflect.DeepEqual(info.Models, want) {
		t.Errorf("tool info = %+v, want chat with models %+v", info, want)
	}

	many := make([]*wire.ModelSpec, MaxModels+1)
	for i := range many {
		many[i] = &wire.ModelSpec{Alias: "m" + strings.Repeat("x", i%50) + string(rune('a'+i%26))}
	}
	for name, tt := range map[string]struct {
		edit func(*wire.ManifestResponse)
		want string
	}{
		"alias with a space":      {func(r *wire.ManifestResponse) { r.Tools[0].Models[1].Alias = "a b" }, `model alias "a b"`},
		"empty alias":             {func(r *wire.ManifestResponse) { r.Tools[0].Models[1].Alias = "" }, `model alias ""`},
		"alias twice":             {func(r *wire.ManifestResponse) { r.Tools[0].Models[1].Alias = "small" }, `declares model "small" twice`},
		"negative price":          {func(r *wire.ManifestResponse) { r.Tools[0].Models[0].OutputCost = -1 }, "negative price"},
		"negative tokens":         {func(r *wire.ManifestResponse) { r.Tools[0].Models[0].MaxTokens = -1 }, "max_tokens -1 out of range"},
		"too many models":         {func(r *wire.ManifestResponse) { r.Tools[0].Models = many }, "at most 256"},
		"bad config schema":       {func(r *wire.ManifestResponse) { r.ConfigSchema = `{"type": 5}` }, "config schema"},
		"no tools, no name":       {func(r *wire.ManifestResponse) { r.Tools = nil }, "no tools and no plugin name"},
		"bad plugin name":         {func(r *wire.ManifestResponse) { r.PluginName = "M!" }, "M!"},
		"name and tools disagree": {func(r *wire.ManifestResponse) { r.PluginName = "other" }, `"other" and "m"`},
	} {
		r := good()
		tt.edit(r)
		if _, err := manifestFromWire("", "sum", r); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tt.want)
		}
	}

	// A plugin whose tools all come from its config installs with none.
	m, err = manifestFromWire("", "sum", &wire.ManifestResponse{ProtocolVersion: wire.ProtocolVersion, PluginName: "mcp"})
	if err != nil || m.Name != "mcp" || len(m.Tools) != 0 {
		t.Errorf("zero tools: %+v, %v", m, err)
	}
}

func TestConfigHash(t *testing.T) {
	t.Parallel()
	for _, empty := range []string{"", " ", "null", "{}"} {
		if h := ConfigHash(json.RawMessage(empty), nil); h != "" {
			t.Errorf("ConfigHash(%q) = %q, want none", empty, h)
		}
	}
	a, b := ConfigHash(json.RawMessage(`{"a":1}`), nil), ConfigHash(json.RawMessage(`{"a":2}`), nil)
	if len(a) != 32 || a == b || a != ConfigHash(json.RawMessage(` {"a":1} `), nil) {
		t.Errorf("hashes %q %q", a, b)
	}
	// The env names count (a key now passed may give other tools), in
	// any order; with env alone there is a hash too.
	e1 := ConfigHash(json.RawMessage(`{"a":1}`), []string{"K1", "K2"})
	if e1 == a || e1 != ConfigHash(json.RawMessage(`{"a":1}`), []string{"K2", "K1"}) {
		t.Errorf("env hashes %q %q", e1, a)
	}
	if ConfigHash(nil, []string{"K1"}) == "" {
		t.Error("env alone hashes to none")
	}
}

// TestManifestCachedByConfig: a plugin's manifest is made with its config
// at launch and cached by (checksum, config hash); another config is
// another manifest, and the config-less one is untouched.
func TestManifestCachedByConfig(t *testing.T) {
	t.Parallel()
	hide := json.RawMessage(`{"hide":["testkit.echo"]}`)
	b := setup(t, Config{PluginConfig: map[string]json.RawMessage{"testkit": hide}}, "testkit")
	if _, ok := b.h.LookupTool("testkit.echo"); ok {
		t.Error("testkit.echo is declared although the config hides it")
	}
	if _, ok := b.h.LookupTool("testkit.sleep"); !ok {
		t.Error("testkit.sleep is missing")
	}
	pins, err := ReadPins(b.pluginsDir)
	if err != nil {
		t.Fatal(err)
	}
	sum := pins["testkit"].SHA256
	if m := readManifestCache(b.pluginsDir, "testkit", sum, ConfigHash(hide, nil)); m == nil {
		t.Error("no cached manifest for the config")
	} else if _, ok := m.Tool("testkit.echo"); ok {
		t.Error("the cached manifest for the config declares testkit.echo")
	}
	cat, err := LoadCatalog(b.pluginsDir, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.LookupTool("testkit.echo"); !ok {
		t.Error("without config, testkit.echo is missing")
	}
	// Installing again keeps the manifests of the pinned binary, whatever
	// their config; a binary no longer pinned loses all of them.
	if _, err := Install(b.pluginsDir, testutil.Plugin(t, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	if readManifestCache(b.pluginsDir, "testkit", sum, ConfigHash(hide, nil)) == nil {
		t.Error("reinstalling the same binary pruned its configured manifest")
	}
	stale := filepath.Join(b.pluginsDir, ManifestDir, strings.Repeat("ab", 32)+"-"+ConfigHash(hide, nil)+".json")
	if err := os.WriteFile(stale, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(b.pluginsDir, testutil.Plugin(t, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the manifest of an unpinned binary survived: %v", err)
	}
}

// TestVanishedToolFailsAtStart: a cached manifest that still lists a tool
// the plugin no longer declares (an MCP server dropped it) is corrected
// when the host starts, because a configured plugin is launched then: the
// host no longer offers the tool to registration, a call of it fails as an
// unknown tool, and the cache is corrected for the CLI's checks.
func TestVanishedToolFailsAtStart(t *testing.T) {
	t.Parallel()
	plugins := t.TempDir()
	m, err := Install(plugins, testutil.Plugin(t, "testkit"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hide := json.RawMessage(`{"hide":["testkit.echo"]}`)
	stale := *m
	stale.ConfigHash = ConfigHash(hide, nil)
	if err := writeManifestCache(plugins, &stale); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{PluginsDir: plugins, DataDir: t.TempDir(), PluginConfig: map[string]json.RawMessage{"testkit": hide}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if _, ok := h.LookupTool("testkit.echo"); ok {
		t.Fatal("the host offers a tool its plugin no longer declares")
	}
	if _, ok := h.LookupTool("testkit.sleep"); !ok {
		t.Fatal("the other tools vanished too")
	}
	_, err = call(t, h, "testkit.echo", `{}`)
	wantKind(t, err, KindUnknownTool)
	fresh := readManifestCache(plugins, "testkit", m.SHA256, ConfigHash(hide, nil))
	if fresh == nil {
		t.Fatal("no cached manifest after the launch")
	}
	if _, ok := fresh.Tool("testkit.echo"); ok {
		t.Error("the cache still lists the vanished tool")
	}
	if r := h.Restarts()["testkit"]; r != 0 {
		t.Errorf("%d restarts: the launch at start serves the calls", r)
	}
}

// TestCheckPluginConfig: a section is checked against the schema its
// installed plugin declares, each problem at its top-level key.
func TestCheckPluginConfig(t *testing.T) {
	t.Parallel()
	plugins := t.TempDir()
	if _, err := Install(plugins, testutil.Plugin(t, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	probs, err := CheckPluginConfig(plugins, map[string]json.RawMessage{
		"testkit":       json.RawMessage(`{"hide":"testkit.echo","answer":42}`),
		"not-installed": json.RawMessage(`{"x":1}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 1 || probs[0].Plugin != "testkit" || probs[0].Key != "hide" || !strings.Contains(probs[0].Message, "want array") {
		t.Errorf("problems = %+v", probs)
	}
	probs, err = CheckPluginConfig(plugins, map[string]json.RawMessage{"testkit": json.RawMessage(`{"hide":["testkit.echo"]}`)})
	if err != nil || len(probs) != 0 {
		t.Errorf("a good section: %+v, %v", probs, err)
	}
}
