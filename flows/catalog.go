package flows

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
