package main

import (
	"testing"

	"github.com/weirhq/weir/plugins/internal/plugintest"
)

// The config schema the manifest declares accepts every key the plugin
// reads and refuses the ones it does not, with their types.
func TestConfigSchemaRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	plugintest.CheckConfigSchema(t, configSchema,
		`{"root": "/srv/files", "max_read_bytes": 1024, "max_write_bytes": 1024, "max_entries": 10}`,
		`{"dir": "/srv"}`, `{"max_read_bytes": "1MiB"}`, `{"max_entries": 0}`)
}
