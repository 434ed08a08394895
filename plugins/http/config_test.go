package main

import (
	"testing"

	"github.com/weirhq/weir/plugins/internal/plugintest"
)

// The config schema the manifest declares accepts every key the plugin
// reads and refuses the ones it does not: an operator who writes
// allow_hosts (not allowed_hosts) is told at config check, instead of
// running without an allow-list.
func TestConfigSchemaRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	plugintest.CheckConfigSchema(t, configSchema,
		`{"timeout_ms": 10000, "max_body_bytes": 4096, "max_redirects": 0, "allowed_hosts": ["api.example.com"]}`,
		`{"allow_hosts": ["api.example.com"]}`, `{"timeout": "10s"}`, `{"timeout_ms": "10s"}`, `{"max_redirects": -1}`)
}
