package flows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
)

// ToolInfo is what registration needs to know about one tool.
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
}

// Catalog resolves tool names at registration. The plugin host implements
// it over the installed plugins' cached manifests; tests and `weir flow
// check --tools` use a JSON file.
type Catalog interface {
	// LookupTool returns the tool named name, or false if no installed
	// plugin provides it.
	LookupTool(name string) (ToolInfo, bool)
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
//	            "input_schema": {"type": "object"}}]}
type catalogFile struct {
	Tools []struct {
		Name        string          `json:"name"`
		Idempotent  bool            `json:"idempotent"`
		Cost        int64           `json:"cost"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// ParseCatalog reads a catalog in the JSON form documented in docs/flows.md.
// A tool named twice, a tool without a name or a negative cost is an error:
// a catalog that says two things about one tool cannot be trusted for
// either.
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
		info := ToolInfo{Name: t.Name, Idempotent: t.Idempotent, Cost: t.Cost}
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
