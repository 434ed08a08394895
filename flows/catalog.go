package flows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// ToolInfo is what registration needs to know about one tool: what the tool
// declares, as the engine reads it too. It is weir's one description of a
// tool; runtime/tool holds only the types of one call.
type ToolInfo struct {
	// Name is the full tool name, "plugin.tool".
	Name string
	// Idempotent says the tool dedupes on the idempotency key, so the
	// runtime may retry it.
	Idempotent bool
	// Cost is the tool's declared budget units per call (0 if undeclared).
	Cost int64
	// InputSchema is the tool's JSON schema for its input, if declared.
	InputSchema []byte
	// OutputSchema is the tool's JSON schema for its output, if declared:
	// what a person's answer for an unknown outcome is checked against.
	OutputSchema []byte
	// Description says what the tool does, as its manifest puts it; an
	// agent's model is shown it beside the input schema.
	Description string
	// Chat says the tool speaks the chat contract (one model turn per
	// call), so an agent may use it as its model tool.
	Chat bool
	// Models are the model aliases a chat tool offers, in the order its
	// manifest lists them; empty when it declares none.
	Models []ModelInfo
	// Timeout is the deadline of a call whose node sets no timeout, as
	// the tool declares it; 0: the engine's default.
	Timeout time.Duration
	// Effect is the tool's declared effect class; "" for a tool that
	// declares only Idempotent (read it through Class).
	Effect Effect
	// Reconcile says the tool answers a reconcile probe: whether a call
	// with an idempotency key happened.
	Reconcile bool
}

// Effect is a tool's effect class (DESIGN §12): what repeating its call
// does. The checker, recovery, fork, replay and the agent's approval
// policy read it from one place, ToolInfo.Class.
type Effect string

// The effect classes.
const (
	// EffectRead: no side effect; a call may be repeated freely, and a
	// fork or a replay may run it again.
	EffectRead Effect = "read"
	// EffectIdempotent: the tool dedupes on the key weir gives it.
	EffectIdempotent Effect = "idempotent"
	// EffectAtMostOnce: the effect must happen at most once and the tool
	// cannot dedupe; weir records the call as started and never runs it
	// again blindly.
	EffectAtMostOnce Effect = "at_most_once"
)

// Class is the tool's effect class: its declared Effect, or, for a tool
// that declares only the older boolean, idempotent or at most once.
func (t ToolInfo) Class() Effect {
	switch {
	case t.Effect != "":
		return t.Effect
	case t.Idempotent:
		return EffectIdempotent
	}
	return EffectAtMostOnce
}

// Repeatable says a call of the tool may be made again with the same key:
// its class is read or idempotent.
func (t ToolInfo) Repeatable() bool { return t.Class() != EffectAtMostOnce }

// ModelInfo is what registration needs to know about one model alias of a
// chat tool.
type ModelInfo struct {
	// Alias is the name flows use for the model (model = "small").
	Alias string
	// MaxTokens is the most output tokens one turn may ask for; 0 when
	// the tool does not say.
	MaxTokens int
	// InputCost and OutputCost are the model's prices in budget units per
	// million tokens; the engine reserves a turn's worst case at them.
	// Both 0: the tool declares no prices (its per-call cost applies).
	InputCost, OutputCost int64
	// Limits are the provider's limits the engine admits turns against.
	Limits ModelLimits
}

// ModelLimits are a model's provider limits, as its chat tool declares
// them (0: none). The engine admits each turn against them before the
// call (docs/design.md §9): a turn over them waits in the queue, holding
// no worker slot, instead of collecting the provider's 429s.
type ModelLimits struct {
	MaxConcurrent     int64 `json:"max_concurrent,omitempty"`
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64 `json:"tokens_per_minute,omitempty"`
}

// Any says some limit is set.
func (l ModelLimits) Any() bool {
	return l.MaxConcurrent > 0 || l.RequestsPerMinute > 0 || l.TokensPerMinute > 0
}

// Model returns the model alias of the tool, or false if it offers none
// by that name.
func (t ToolInfo) Model(alias string) (ModelInfo, bool) {
	for _, m := range t.Models {
		if m.Alias == alias {
			return m, true
		}
	}
	return ModelInfo{}, false
}

// ModelAliases lists the tool's model aliases, for suggestions.
func (t ToolInfo) ModelAliases() []string {
	out := make([]string, len(t.Models))
	for i, m := range t.Models {
		out[i] = m.Alias
	}
	return out
}

// Catalog resolves tool names at registration. The plugin host implements
// it over the installed plugins' cached manifests; tests and `weir flow
// check --tools` use a JSON file.
type Catalog interface {
	// LookupTool returns the tool named name, or false if no installed
	// plugin provides it.
	LookupTool(name string) (ToolInfo, bool)
}

// ToolLister is a Catalog that can list its tools' names. Every catalog
// should: an unknown tool's diagnostic then suggests the nearest name, and
// an agent's missing model tool lists the chat tools there are.
type ToolLister interface {
	// Names returns the catalog's tool names, sorted.
	Names() []string
}

// MapCatalog is a Catalog held in memory, keyed by tool name.
type MapCatalog map[string]ToolInfo

// LookupTool implements Catalog.
func (c MapCatalog) LookupTool(name string) (ToolInfo, bool) {
	t, ok := c[name]
	return t, ok
}

// Names returns the catalog's tool names, sorted.
func (c MapCatalog) Names() []string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// catalogFile is the JSON form read by LoadCatalogFile:
//
//	{"tools": [{"name": "web.search", "idempotent": true, "cost": 1,
//	            "input_schema": {"type": "object"}},
//	           {"name": "llm.chat", "idempotent": true, "chat": true,
//	            "models": [{"alias": "small", "max_tokens": 1024}]}]}
type catalogFile struct {
	Tools []struct {
		Name        string          `json:"name"`
		Idempotent  bool            `json:"idempotent"`
		Cost        int64           `json:"cost"`
		InputSchema json.RawMessage `json:"input_schema"`
		Description string          `json:"description"`
		Chat        bool            `json:"chat"`
		Models      []struct {
			Alias     string `json:"alias"`
			MaxTokens int    `json:"max_tokens"`
		} `json:"models"`
	} `json:"tools"`
}

// ParseCatalog reads a catalog in the JSON form documented in docs/flows.md.
// A tool named twice, a tool without a name or a negative cost is an error:
// a catalog that says two things about one tool cannot be trusted for
// either. So are models on a tool that does not speak the chat contract,
// a model without an alias, an alias listed twice and a negative
// max_tokens.
func ParseCatalog(data []byte) (MapCatalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f catalogFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if dec.More() {
		return nil, errors.New("catalog: trailing data after the JSON object")
	}
	c := make(MapCatalog, len(f.Tools))
	for i, t := range f.Tools {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("catalog: tool %d has no name", i)
		case t.Cost < 0:
			return nil, fmt.Errorf("catalog: tool %s: negative cost %d", t.Name, t.Cost)
		}
		if _, dup := c[t.Name]; dup {
			return nil, fmt.Errorf("catalog: tool %s is listed twice", t.Name)
		}
		info := ToolInfo{Name: t.Name, Idempotent: t.Idempotent, Cost: t.Cost, Chat: t.Chat, Description: t.Description}
		if len(t.Models) > 0 && !t.Chat {
			return nil, fmt.Errorf("catalog: tool %s lists models but does not say \"chat\": true", t.Name)
		}
		for j, m := range t.Models {
			switch {
			case m.Alias == "":
				return nil, fmt.Errorf("catalog: tool %s: model %d has no alias", t.Name, j)
			case m.MaxTokens < 0:
				return nil, fmt.Errorf("catalog: tool %s: model %s: negative max_tokens %d", t.Name, m.Alias, m.MaxTokens)
			}
			if _, dup := info.Model(m.Alias); dup {
				return nil, fmt.Errorf("catalog: tool %s: model %s is listed twice", t.Name, m.Alias)
			}
			info.Models = append(info.Models, ModelInfo{Alias: m.Alias, MaxTokens: m.MaxTokens})
		}
		if len(t.InputSchema) > 0 && string(t.InputSchema) != "null" {
			info.InputSchema = []byte(t.InputSchema)
		}
		c[t.Name] = info
	}
	return c, nil
}

// LoadCatalogFile reads a JSON catalog file (see ParseCatalog).
func LoadCatalogFile(path string) (MapCatalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCatalog(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
