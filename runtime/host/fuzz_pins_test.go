package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/sdk/wire"
)

// FuzzReadPins feeds ReadPins any pins file. The pins are the trust root of
// plugin launches, and a pinned name becomes a path twice (the binary
// PLUGINS/NAME and the state directory DATA/plugin-state/NAME): whatever
// the file holds, ReadPins never panics and accepts only names that stay
// inside their directory and checksums that are a SHA-256.
func FuzzReadPins(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	f.Add(`{"version":1,"plugins":{"mail":{"sha256":"` + sum + `","installed_at":"2026-01-01T00:00:00Z"}}}`)
	f.Add(`{"version":1,"plugins":{"../etc":{"sha256":"` + sum + `"}}}`)
	f.Add(`{"version":1,"plugins":{"a/b":{"sha256":"` + sum + `"}}}`)
	f.Add(`{"version":1,"plugins":{"mail":{"sha256":"abc"}}}`)
	f.Add(`{"version":2,"plugins":{}}`)
	f.Add(`{"version":1}`)
	f.Add(`[`)
	dir := f.TempDir() // one file rewritten per input: a directory per input slows fuzzing a hundredfold
	f.Fuzz(func(t *testing.T, doc string) {
		if err := os.WriteFile(filepath.Join(dir, PinsFile), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		pins, err := ReadPins(dir)
		if err != nil {
			return
		}
		if pins == nil {
			t.Fatal("no error and no pins map")
		}
		for name, p := range pins {
			if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`+"\x00") || filepath.Base(name) != name {
				t.Fatalf("accepted plugin name %q, which is not a plain file name", name)
			}
			if b, err := decodeSum(p.SHA256); err != nil || len(b) != 32 {
				t.Fatalf("accepted checksum %q of %s", p.SHA256, name)
			}
		}
	})
}

// FuzzManifestCache feeds the manifest cache any file content: the cache is
// only a cache, so whatever a cached file holds, reading it never panics
// and yields either nothing (the plugin is asked again) or a manifest of
// exactly the plugin and binary asked for.
func FuzzManifestCache(f *testing.F) {
	sum := strings.Repeat("cd", 32)
	f.Add(`{"name":"mail","sha256":"`+sum+`","protocol_version":1,"tools":[{"name":"mail.send","idempotent":false,"cost":0}]}`, "mail")
	f.Add(`{"name":"mail","sha256":"`+strings.Repeat("00", 32)+`","protocol_version":1,"tools":[]}`, "mail")
	f.Add(`{"name":"other","sha256":"`+sum+`","protocol_version":1}`, "mail")
	f.Add(`{"name":"mail","sha256":"`+sum+`","protocol_version":99}`, "mail")
	f.Add(`{`, "mail")
	dir := f.TempDir()
	path := manifestCachePath(dir, sum, "")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc, name string) {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		m := readManifestCache(dir, name, sum, "")
		if m == nil {
			return
		}
		if m.Name != name || m.SHA256 != sum || m.ProtocolVersion < wire.MinProtocolVersion || m.ProtocolVersion > wire.ProtocolVersion {
			t.Fatalf("asked for %s %s, got the manifest of %s %s (protocol %d)", name, sum, m.Name, m.SHA256, m.ProtocolVersion)
		}
	})
}
