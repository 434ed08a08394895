package chat

import (
	"regexp"
	"testing"
)

var providerAlphabet = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Every name the mapping accepts fits the providers' alphabet and maps
// back exactly; two accepted names never map to the same provider name.
func FuzzProviderToolName(f *testing.F) {
	for _, s := range []string{"notes.put", "a.b.c", "x_y.z-w", "a__b", "a_.b", ".", "..", "_", "a.", ".a", "web.search_2"} {
		f.Add(s, "notes.put")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ma, errA := ProviderToolName(a)
		if errA == nil {
			if !providerAlphabet.MatchString(ma) {
				t.Fatalf("%q maps to %q, outside the alphabet", a, ma)
			}
			if back := UnmapToolName(ma); back != a {
				t.Fatalf("%q maps to %q, which unmaps to %q", a, ma, back)
			}
		}
		mb, errB := ProviderToolName(b)
		if errA == nil && errB == nil && a != b && ma == mb {
			t.Fatalf("%q and %q both map to %q", a, b, ma)
		}
	})
}
