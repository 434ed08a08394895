package main

import (
	"testing"

	"github.com/weirhq/weir/sdk/wire"
)

// The config schema the manifest declares accepts every key the plugin
// reads and refuses the ones it does not, with their types.
func TestConfigSchemaRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	s, err := wire.CompileSchema(configSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`{"root": "/srv/files", "max_read_bytes": 1024, "max_write_bytes": 1024, "max_entries": 10}`)); err != nil {
		t.Fatalf("the keys the plugin reads are refused: %v", err)
	}
	for _, bad := range []string{`{"dir": "/srv"}`, `{"max_read_bytes": "1MiB"}`, `{"max_entries": 0}`} {
		if err := s.Validate([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
