package host

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/sdk/wire"
)

// FuzzManifest feeds manifestFromWire what an untrusted plugin may answer:
// it must never panic, and what it accepts must be consistent.
func FuzzManifest(f *testing.F) {
	f.Add("memo", uint32(1), "memo.put", `{"type":"object"}`, "memo.get", "", int64(0))
	f.Add("", uint32(1), "a.b", `{"$ref":"file:///etc/passwd"}`, "a.c", `{"type":"nope"}`, int64(3))
	f.Add("x", uint32(2), "x.y", "", "z.w", "", int64(-1))
	f.Add("x", uint32(1), "x.y", "", "x.y", "[", int64(1))
	f.Fuzz(func(t *testing.T, want string, version uint32, n1, s1, n2, s2 string, cost int64) {
		m := &wire.ManifestResponse{ProtocolVersion: version, Tools: []*wire.ToolSpec{
			{Name: n1, InputSchema: s1, Cost: cost},
			{Name: n2, OutputSchema: s2, Idempotent: true},
		}}
		pm, err := manifestFromWire(want, "ab", m)
		if err != nil {
			return
		}
		if !wire.SpeaksVersion(version) || (want != "" && pm.Name != want) || len(pm.Tools) != 2 || n1 == n2 || cost < 0 {
			t.Fatalf("accepted %+v from %v", pm, m)
		}
		for _, tm := range pm.Tools {
			if !strings.HasPrefix(tm.Name, pm.Name+".") {
				t.Fatalf("tool %q outside plugin %q", tm.Name, pm.Name)
			}
			if _, err := wire.CompileSchema(string(tm.InputSchema)); err != nil {
				t.Fatalf("accepted a schema that does not compile: %v", err)
			}
		}
	})
}
