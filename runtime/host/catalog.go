package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/sdk/chat"
	"github.com/weirhq/weir/sdk/dedupe"
	"github.com/weirhq/weir/sdk/wire"
)

// PluginManifest is what a plugin declared, as cached by checksum.
type PluginManifest struct {
	// Name is the plugin's name, the prefix of its tool names.
	Name string `json:"name"`
	// SHA256 is the checksum of the binary that declared it.
	SHA256          string `json:"sha256"`
	ProtocolVersion int    `json:"protocol_version"`
	SDKVersion      string `json:"sdk_version,omitempty"`
	// ConfigHash identifies the config section the plugin was launched
	// with when it declared this manifest ("" for none): a plugin may
	// produce its tools from its config, so the cache is keyed by both.
	ConfigHash string `json:"config_hash,omitempty"`
	// ConfigSchema is the JSON schema of the plugin's config section, as
	// the plugin declares it (empty: undeclared).
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
	Tools        []ToolManifest  `json:"tools"`
}

// Tool returns the manifest's tool named name.
func (m *PluginManifest) Tool(name string) (ToolManifest, bool) {
	for _, t := range m.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return ToolManifest{}, false
}

// ToolManifest is one tool's declaration.
type ToolManifest struct {
	// Name is the full tool name, "plugin.tool".
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Idempotent: the tool may be retried (its class is read or
	// idempotent); otherwise calls are serialized and made at most once.
	Idempotent bool `json:"idempotent"`
	// Effect is the tool's effect class: what the plugin declares
	// (protocol revision 2), or, for a revision-1 plugin, idempotent or
	// at_most_once as Idempotent says. Read it through Class: a manifest
	// cached before effect classes has none.
	Effect flows.Effect `json:"effect,omitempty"`
	// Reconcile says the tool answers a reconcile probe (revision 2).
	Reconcile bool `json:"reconcile,omitempty"`
	// Cost is the declared budget units per call.
	Cost         int64           `json:"cost"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Contract is the contract the tool says it speaks ("weir.chat/v1").
	Contract string `json:"contract,omitempty"`
	// Models are the models a chat tool serves.
	Models []ModelManifest `json:"models,omitempty"`
	// Timeout is the deadline of a call whose caller sets none (a node
	// without timeout), as the tool declares it (protocol revision 2);
	// 0: the caller's default.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Class is the tool's effect class (flows.ToolInfo.Class).
func (t ToolManifest) Class() flows.Effect {
	return flows.ToolInfo{Effect: t.Effect, Idempotent: t.Idempotent}.Class()
}

// ModelManifest is one model of a chat tool: its alias, output limit and
// prices in budget units per million tokens.
type ModelManifest struct {
	Alias      string `json:"alias"`
	MaxTokens  int64  `json:"max_tokens,omitempty"`
	InputCost  int64  `json:"input_cost,omitempty"`
	OutputCost int64  `json:"output_cost,omitempty"`
	flows.ModelLimits
}

// Limits of what a manifest may declare.
const (
	// MaxModels bounds the models one chat tool declares.
	MaxModels = 256
	// maxModelTokens bounds a model's max_tokens (matches flows' bound of
	// an int on every platform weir builds for).
	maxModelTokens = 1 << 31
	// maxModelLimit bounds a model's max_concurrent, requests_per_minute
	// and tokens_per_minute (the llm plugin's own bound of them).
	maxModelLimit = 1 << 30
)

// modelAlias is what a model alias may be: flows name it in model = "...".
var modelAlias = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// manifestFromWire checks what a plugin answered to Manifest and converts it.
// wantName is the pinned name, or "" at install.
func manifestFromWire(wantName, sum string, m *wire.ManifestResponse) (*PluginManifest, error) {
	if !wire.SpeaksVersion(m.GetProtocolVersion()) {
		return nil, fmt.Errorf("plugin speaks protocol version %d, weir %d to %d", m.GetProtocolVersion(), wire.MinProtocolVersion, wire.ProtocolVersion)
	}
	pm := &PluginManifest{SHA256: sum, ProtocolVersion: int(m.GetProtocolVersion()), SDKVersion: m.GetSdkVersion(), Name: m.GetPluginName()}
	if pm.Name != "" {
		if err := wire.CheckPluginName(pm.Name); err != nil {
			return nil, err
		}
	}
	if len(m.GetTools()) == 0 && pm.Name == "" {
		return nil, errors.New("plugin declares no tools and no plugin name")
	}
	if s := m.GetConfigSchema(); s != "" {
		if _, err := wire.CompileSchema(s); err != nil {
			return nil, fmt.Errorf("config schema: %w", err)
		}
		pm.ConfigSchema = json.RawMessage(s)
	}
	seen := map[string]bool{}
	for _, t := range m.GetTools() {
		p, _, err := wire.SplitToolName(t.GetName())
		if err != nil {
			return nil, err
		}
		if pm.Name == "" {
			pm.Name = p
		} else if p != pm.Name {
			return nil, fmt.Errorf("plugin declares tools of two plugins, %q and %q", pm.Name, p)
		}
		if seen[t.GetName()] {
			return nil, fmt.Errorf("plugin declares %q twice", t.GetName())
		}
		seen[t.GetName()] = true
		if t.GetCost() < 0 {
			return nil, fmt.Errorf("tool %q declares a negative cost", t.GetName())
		}
		if _, err := wire.CompileSchema(t.GetInputSchema()); err != nil {
			return nil, fmt.Errorf("tool %q: input schema: %w", t.GetName(), err)
		}
		if _, err := wire.CompileSchema(t.GetOutputSchema()); err != nil {
			return nil, fmt.Errorf("tool %q: output schema: %w", t.GetName(), err)
		}
		tm := ToolManifest{Name: t.GetName(), Description: t.GetDescription(), Idempotent: t.GetIdempotent(), Cost: t.GetCost()}
		if tm.Effect, tm.Reconcile, err = effectFromWire(pm.ProtocolVersion, t); err != nil {
			return nil, err
		}
		if s := t.GetInputSchema(); s != "" {
			tm.InputSchema = json.RawMessage(s)
		}
		if s := t.GetOutputSchema(); s != "" {
			tm.OutputSchema = json.RawMessage(s)
		}
		if err := addModels(&tm, t); err != nil {
			return nil, err
		}
		if d := t.GetDefaultTimeout(); d != nil {
			if d.CheckValid() != nil || d.AsDuration() <= 0 || d.AsDuration() > wire.MaxToolTimeout {
				return nil, fmt.Errorf("tool %q: default timeout %v is outside 0..%v", t.GetName(), d.AsDuration(), wire.MaxToolTimeout)
			}
			tm.Timeout = d.AsDuration()
		}
		pm.Tools = append(pm.Tools, tm)
	}
	if wantName != "" && pm.Name != wantName {
		return nil, fmt.Errorf("plugin installed as %q declares tools of plugin %q", wantName, pm.Name)
	}
	sort.Slice(pm.Tools, func(i, j int) bool { return pm.Tools[i].Name < pm.Tools[j].Name })
	return pm, nil
}

// effectFromWire reads a tool's effect class and whether it has a probe.
// Both are revision 2's: a revision-1 plugin's class is its idempotent
// boolean, and it has no probe. A revision-2 plugin whose boolean
// disagrees with its class is refused: one of the two is a mistake, and
// a revision-1 host would read the boolean.
func effectFromWire(rev int, t *wire.ToolSpec) (flows.Effect, bool, error) {
	fromBool := flows.ToolInfo{Idempotent: t.GetIdempotent()}.Class()
	if rev < 2 {
		return fromBool, false, nil
	}
	var e flows.Effect
	switch t.GetEffect() {
	case wire.Effect_EFFECT_UNSPECIFIED:
		e = fromBool
	case wire.Effect_EFFECT_READ:
		e = flows.EffectRead
	case wire.Effect_EFFECT_IDEMPOTENT:
		e = flows.EffectIdempotent
	case wire.Effect_EFFECT_AT_MOST_ONCE:
		e = flows.EffectAtMostOnce
	default:
		return "", false, fmt.Errorf("tool %q declares an unknown effect class (%d)", t.GetName(), int32(t.GetEffect()))
	}
	if repeatable := e != flows.EffectAtMostOnce; t.GetIdempotent() != repeatable {
		return "", false, fmt.Errorf("tool %q declares the effect class %s but idempotent = %v: a revision-2 plugin's idempotent is true exactly for read and idempotent tools; rebuild the plugin with the current SDK", t.GetName(), e, t.GetIdempotent())
	}
	if e == flows.EffectRead && t.GetReconcile() {
		return "", false, fmt.Errorf("tool %q is a read and declares a reconcile probe: a read has no effect to reconcile", t.GetName())
	}
	return e, t.GetReconcile(), nil
}

// addModels checks and copies a tool's contract and models.
func addModels(tm *ToolManifest, t *wire.ToolSpec) error {
	tm.Contract = t.GetContract()
	if len(tm.Contract) > 128 {
		return fmt.Errorf("tool %q: contract name longer than 128 bytes", t.GetName())
	}
	if len(t.GetModels()) > MaxModels {
		return fmt.Errorf("tool %q declares %d models; at most %d", t.GetName(), len(t.GetModels()), MaxModels)
	}
	seen := map[string]bool{}
	for _, m := range t.GetModels() {
		switch {
		case !modelAlias.MatchString(m.GetAlias()):
			return fmt.Errorf("tool %q: model alias %q: 1-64 letters, digits and _ . : -, starting with a letter or digit", t.GetName(), m.GetAlias())
		case seen[m.GetAlias()]:
			return fmt.Errorf("tool %q declares model %q twice", t.GetName(), m.GetAlias())
		case m.GetMaxTokens() < 0 || m.GetMaxTokens() > maxModelTokens:
			return fmt.Errorf("tool %q: model %q: max_tokens %d out of range 0..%d", t.GetName(), m.GetAlias(), m.GetMaxTokens(), maxModelTokens)
		case m.GetInputCost() < 0 || m.GetOutputCost() < 0:
			return fmt.Errorf("tool %q: model %q declares a negative price", t.GetName(), m.GetAlias())
		}
		lim := flows.ModelLimits{MaxConcurrent: m.GetMaxConcurrent(), RequestsPerMinute: m.GetRequestsPerMinute(), TokensPerMinute: m.GetTokensPerMinute()}
		for _, l := range []struct {
			name string
			v    int64
		}{{"max_concurrent", lim.MaxConcurrent}, {"requests_per_minute", lim.RequestsPerMinute}, {"tokens_per_minute", lim.TokensPerMinute}} {
			if l.v < 0 || l.v > maxModelLimit {
				return fmt.Errorf("tool %q: model %q: %s %d out of range 0..%d", t.GetName(), m.GetAlias(), l.name, l.v, maxModelLimit)
			}
		}
		seen[m.GetAlias()] = true
		tm.Models = append(tm.Models, ModelManifest{Alias: m.GetAlias(), MaxTokens: m.GetMaxTokens(), InputCost: m.GetInputCost(), OutputCost: m.GetOutputCost(), ModelLimits: lim})
	}
	return nil
}

// ConfigHash identifies what a plugin is launched with, in the manifest
// cache: its config section and the names of the variables its block
// passes (env; a plugin may declare other tools when a key is there, so a
// fixed env is a new manifest too; values are never hashed). "" for no
// section (or an empty one) and no env, else the first 16 bytes of the
// SHA-256 in hex. The section's JSON has sorted keys (config.Parse), so
// one content has one hash.
func ConfigHash(section json.RawMessage, env []string) string {
	t := bytes.TrimSpace(section)
	if string(t) == "null" || string(t) == "{}" {
		t = nil
	}
	if len(t) == 0 && len(env) == 0 {
		return ""
	}
	names := append([]string(nil), env...)
	sort.Strings(names)
	h := sha256.New()
	h.Write(t)
	for _, n := range names {
		h.Write([]byte{0})
		h.Write([]byte(n))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// manifestCachePath is ManifestDir/SHA256.json for a plugin launched
// without config, ManifestDir/SHA256-CONFIGHASH.json with one.
func manifestCachePath(pluginsDir, sum, configHash string) string {
	name := sum
	if configHash != "" {
		name += "-" + configHash
	}
	return filepath.Join(pluginsDir, ManifestDir, name+".json")
}

// readManifestCache returns the cached manifest of the binary with
// checksum sum launched with the config section whose hash is configHash,
// or nil if there is none (or it is unreadable: the cache is only a
// cache, the plugin is asked again).
func readManifestCache(pluginsDir, name, sum, configHash string) *PluginManifest {
	b, err := os.ReadFile(manifestCachePath(pluginsDir, sum, configHash))
	if err != nil {
		return nil
	}
	var m PluginManifest
	if json.Unmarshal(b, &m) != nil || m.SHA256 != sum || m.Name != name || m.ConfigHash != configHash ||
		m.ProtocolVersion < wire.MinProtocolVersion || m.ProtocolVersion > wire.ProtocolVersion {
		return nil
	}
	for _, t := range m.Tools {
		if t.Effect == "" {
			// Cached before effect classes were read: the plugin may
			// declare a class or a probe this cache does not know.
			return nil
		}
	}
	return &m
}

func writeManifestCache(pluginsDir string, m *PluginManifest) error {
	if err := os.MkdirAll(filepath.Join(pluginsDir, ManifestDir), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return dedupe.WriteFileAtomic(manifestCachePath(pluginsDir, m.SHA256, m.ConfigHash), append(b, '\n'), 0o644)
}

// sameManifest reports whether two manifests declare the same things.
func sameManifest(a, b *PluginManifest) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// PluginInfo is one installed plugin.
type PluginInfo struct {
	Name string `json:"name"`
	// Path is the binary, PLUGINS/NAME.
	Path string `json:"path"`
	// SHA256 is the pinned checksum.
	SHA256 string `json:"sha256"`
	// Manifest is the cached manifest, nil if it could not be obtained
	// (Err says why).
	Manifest *PluginManifest `json:"manifest,omitempty"`
	Err      error           `json:"-"`
}

// Catalog is the set of installed tools, resolved from the pins and the
// manifest cache. It implements flows.Catalog for flow registration.
type Catalog struct {
	plugins []PluginInfo
	tools   map[string]ToolManifest
}

var _ flows.Catalog = (*Catalog)(nil)

// LoadCatalog reads the pins of pluginsDir and each pinned binary's cached
// manifest. Only a plugin whose manifest is not cached (deleted cache,
// pins written by hand) is launched, once, to fetch it; its state
// directory is under dataDir. A plugin that cannot be read is listed with
// its error and contributes no tools: one broken plugin does not hide the
// others.
func LoadCatalog(pluginsDir, dataDir string) (*Catalog, error) {
	return LoadCatalogFor(Config{PluginsDir: pluginsDir, DataDir: dataDir})
}

// LoadCatalogFor is LoadCatalog for the plugins configured as cfg says
// (PluginsDir, DataDir, PluginConfig, PluginEnv, PluginMemoryMax): each
// plugin's manifest is the one cached for its config section, so a plugin
// whose tools come from its config (models, MCP servers) shows them. A
// plugin launched to fetch it gets its section, env and memory cap.
func LoadCatalogFor(cfg Config) (*Catalog, error) {
	pluginsDir, dataDir := cfg.PluginsDir, cfg.DataDir
	var err error
	if pluginsDir, err = filepath.Abs(pluginsDir); err != nil {
		return nil, err
	}
	if dataDir != "" {
		if dataDir, err = filepath.Abs(dataDir); err != nil {
			return nil, err
		}
	}
	return loadCatalog(pluginsDir, cfg.PluginConfig, cfg.PluginEnv, false, func(name string, sum []byte) (*PluginManifest, error) {
		inst, err := launch(launchSpec{
			name:         name,
			path:         filepath.Join(pluginsDir, name),
			sum:          sum,
			stateDir:     stateDir(dataDir, name),
			config:       cfg.PluginConfig[name],
			env:          cfg.PluginEnv[name],
			memoryMax:    cfg.PluginMemoryMax[name],
			logger:       hclog.NewNullLogger(),
			maxMsg:       defaultMaxMessageBytes,
			startTimeout: defaultStartTimeout,
		})
		if err != nil {
			return nil, err
		}
		inst.stop()
		return inst.manifest, nil
	})
}

// loadCatalog builds a Catalog, calling fetch for each plugin whose
// manifest is not cached and caching what it returns. With fresh, a
// plugin launched with a config section (or env) is fetched even when
// cached: its tools may come from its config and from what it finds at
// launch (an MCP server's tool list), so the catalog registration checks
// is the one the plugin declares now; if that launch fails, the cached
// manifest stands in (its calls fail until the plugin launches).
func loadCatalog(pluginsDir string, configs map[string]json.RawMessage, envs map[string][]string, fresh bool, fetch func(name string, sum []byte) (*PluginManifest, error)) (*Catalog, error) {
	pins, err := ReadPins(pluginsDir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(pins))
	for n := range pins {
		names = append(names, n)
	}
	sort.Strings(names)
	c := &Catalog{tools: map[string]ToolManifest{}}
	for _, name := range names {
		pin := pins[name]
		info := PluginInfo{Name: name, Path: filepath.Join(pluginsDir, name), SHA256: pin.SHA256}
		configHash := ConfigHash(configs[name], envs[name])
		info.Manifest = readManifestCache(pluginsDir, name, pin.SHA256, configHash)
		if info.Manifest == nil || (fresh && configHash != "") {
			sum, _ := decodeSum(pin.SHA256) // ReadPins checked it
			m, err := fetch(name, sum)
			if err != nil && info.Manifest == nil {
				info.Err = err
			} else if err == nil {
				info.Manifest = m
				// Best effort: a read-only plugins directory only costs
				// a launch next time.
				_ = writeManifestCache(pluginsDir, m)
			}
		}
		if info.Manifest != nil {
			for _, t := range info.Manifest.Tools {
				c.tools[t.Name] = t
			}
		}
		c.plugins = append(c.plugins, info)
	}
	return c, nil
}

// LookupTool returns the tool named name (flows.Catalog).
func (c *Catalog) LookupTool(name string) (flows.ToolInfo, bool) {
	t, ok := c.tools[name]
	if !ok {
		return flows.ToolInfo{}, false
	}
	return toolInfo(t), true
}

// Names returns the tools' names, sorted, so that an unknown tool's
// diagnostic suggests the nearest (flows.ToolLister).
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.tools))
	for name := range c.tools {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

var _ flows.ToolLister = (*Catalog)(nil)

// toolInfo is what registration needs of a tool. A tool whose input
// schema is the chat contract's request schema speaks the contract
// (chat.SpeaksContract), so an agent may take its turns from it.
//
// A chat tool's models carry their limits and prices, so registration
// checks a flow's model alias and the engine reserves a turn at its price.
func toolInfo(t ToolManifest) flows.ToolInfo {
	info := flows.ToolInfo{Name: t.Name, Idempotent: t.Idempotent, Cost: t.Cost, InputSchema: []byte(t.InputSchema), Timeout: t.Timeout,
		Effect: t.Effect, Reconcile: t.Reconcile,
		Description: t.Description, Chat: t.Contract == chat.Contract || chat.SpeaksContract(string(t.InputSchema))}
	for _, m := range t.Models {
		info.Models = append(info.Models, flows.ModelInfo{Alias: m.Alias, MaxTokens: int(m.MaxTokens), InputCost: m.InputCost, OutputCost: m.OutputCost, Limits: m.ModelLimits})
	}
	if len(t.OutputSchema) > 0 {
		info.OutputSchema = []byte(t.OutputSchema) // a resolve's result is checked against it
	}
	return info
}

// Tools returns every tool, sorted by name.
func (c *Catalog) Tools() []ToolManifest {
	out := make([]ToolManifest, 0, len(c.tools))
	for _, t := range c.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Plugins returns every pinned plugin, sorted by name.
func (c *Catalog) Plugins() []PluginInfo { return append([]PluginInfo(nil), c.plugins...) }

// Verify checks that a plugin's binary still matches its pin; the host
// refuses to launch it otherwise.
func (p PluginInfo) Verify() error {
	sum, err := FileSHA256(p.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return toolErrorf(KindChecksum, p.Name, "binary %s is missing", p.Path)
	}
	if err != nil {
		return err
	}
	if sum != p.SHA256 {
		return toolErrorf(KindChecksum, p.Name, "binary %s has SHA-256 %s, pinned %s: reinstall it with `weir plugin install`", p.Path, sum, p.SHA256)
	}
	return nil
}

func stateDir(dataDir, name string) string {
	if dataDir == "" {
		return ""
	}
	return filepath.Join(dataDir, "plugin-state", name)
}

// ConfigProblem is where a plugin's config section disagrees with the
// config schema the plugin declares.
type ConfigProblem struct {
	Plugin string
	// Key is the section's top-level key at fault ("" for the section as
	// a whole), so the caller can cite its file:line.
	Key     string
	Message string
}

// CheckPluginConfig checks each section of sections against the config
// schema its installed plugin declared (in the manifest cached at
// install, which needs no config): unknown keys and wrong types are
// refused before the plugin runs. A section of a plugin that is not
// installed, or that declares no schema, is not checked here.
func CheckPluginConfig(pluginsDir string, sections map[string]json.RawMessage) ([]ConfigProblem, error) {
	pins, err := ReadPins(pluginsDir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []ConfigProblem
	for _, name := range names {
		pin, ok := pins[name]
		if !ok {
			continue
		}
		m := readManifestCache(pluginsDir, name, pin.SHA256, "")
		if m == nil {
			m = readManifestCache(pluginsDir, name, pin.SHA256, ConfigHash(sections[name], nil))
		}
		if m == nil || len(m.ConfigSchema) == 0 {
			continue
		}
		schema, err := wire.CompileSchema(string(m.ConfigSchema))
		if err != nil {
			out = append(out, ConfigProblem{Plugin: name, Message: fmt.Sprintf("the plugin's config schema does not compile: %v", err)})
			continue
		}
		probs, err := schema.Problems(sections[name])
		if err != nil {
			out = append(out, ConfigProblem{Plugin: name, Message: err.Error()})
			continue
		}
		for _, p := range probs {
			// The root's location says nothing the file:line does not.
			cp := ConfigProblem{Plugin: name, Message: strings.TrimPrefix(p.Message, "at '': ")}
			if len(p.Path) > 0 {
				cp.Key = p.Path[0]
			}
			out = append(out, cp)
		}
	}
	return out, nil
}
