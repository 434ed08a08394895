package wire

import "time"

// HealthFile is the file, in a plugin's state directory (EnvStateDir),
// where a plugin that reaches servers of its own (an MCP bridge) says
// which of them it cannot reach now: JSON, a Health, rewritten whole
// (atomically) each time that changes. weir reads it for `weir status`; a
// plugin without such servers writes none.
const HealthFile = "health.json"

// MaxHealthBytes bounds HealthFile: what is beyond is not read.
const MaxHealthBytes = 64 << 10

// Health is HealthFile's content.
type Health struct {
	// Down lists the servers the plugin cannot reach, by name.
	Down []DownServer `json:"down"`
	// Updated is when the plugin last wrote the file.
	Updated time.Time `json:"updated"`
}

// DownServer is one server a plugin cannot reach.
type DownServer struct {
	Name string `json:"name"`
	// Since is when the plugin first failed to reach it, this time.
	Since time.Time `json:"since"`
	// Error is the last failure, cut to a line.
	Error string `json:"error,omitempty"`
}
