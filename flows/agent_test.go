package flows

import (
	"strings"
	"testing"
)

func TestModelToolName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 60)
	for _, tc := range []struct {
		name, model string // model "": no model name
	}{
		{"web.search", "web__search"},
		{"llm.chat", "llm__chat"},
		{"notes.put-v2", "notes__put-v2"},
		{"summarize", "summarize"},
		{"Research_2", "Research_2"},
		{"a.b.c", "a__b__c"},
		{"a..b", "a____b"},
		{long + ".abc", long + "__abc"}, // 65 characters
		{long + ".ab", long + "__ab"},   // 64: the most providers accept
		{"my__tool", ""},
		{"a_.b", ""},
		{"a._b", ""},
		{"x.y_", "x__y_"},
		{"_x.y", "_x__y"},
		{"web search", ""},
		{"wéb.search", ""},
		{"", ""},
	} {
		got, err := ModelToolName(tc.name)
		want := tc.model
		if len(want) > MaxModelToolName {
			want = ""
		}
		switch {
		case want == "" && err == nil:
			t.Errorf("ModelToolName(%q) = %q, want an error", tc.name, got)
		case want != "" && (err != nil || got != want):
			t.Errorf("ModelToolName(%q) = %q, %v; want %q", tc.name, got, err, want)
		case want != "":
			back, err := ToolNameFromModel(got)
			if err != nil || back != tc.name {
				t.Errorf("ToolNameFromModel(%q) = %q, %v; want %q", got, back, err, tc.name)
			}
		}
	}
}

func TestToolNameFromModelRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"",
		"web___search", // three underscores: no name maps there
		"a_____b",
		"web.search", // a dot is not in the providers' alphabet
		"my tool",
		strings.Repeat("a", MaxModelToolName+1),
	} {
		if name, err := ToolNameFromModel(s); err == nil {
			t.Errorf("ToolNameFromModel(%q) = %q, want an error", s, name)
		}
	}
	if name, err := ToolNameFromModel("summarize"); err != nil || name != "summarize" {
		t.Errorf("plain name: %q, %v", name, err)
	}
}

// The mapping is one-to-one on every name it accepts: no two names reach
// a model under the same name.
func TestModelToolNameIsInjective(t *testing.T) {
	t.Parallel()
	alphabet := []byte{'a', '_', '.', '-'}
	seen := map[string]string{}
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		if len(prefix) > 0 {
			name := string(prefix)
			if m, err := ModelToolName(name); err == nil {
				if prev, dup := seen[m]; dup {
					t.Fatalf("%q and %q both map to %q", prev, name, m)
				}
				seen[m] = name
				if back, err := ToolNameFromModel(m); err != nil || back != name {
					t.Fatalf("%q -> %q -> %q, %v", name, m, back, err)
				}
			}
		}
		if len(prefix) == 6 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	if len(seen) < 100 {
		t.Fatalf("only %d names mapped", len(seen))
	}
}

func TestParseCatalogModels(t *testing.T) {
	t.Parallel()
	c, err := ParseCatalog([]byte(`{"tools": [{"name": "llm.chat", "idempotent": true, "chat": true, "description": "One model turn.",
		"models": [{"alias": "small", "max_tokens": 1024}, {"alias": "any"}]}, {"name": "a.b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := c.LookupTool("llm.chat")
	if !info.Chat || len(info.Models) != 2 || info.Description != "One model turn." {
		t.Fatalf("llm.chat = %+v", info)
	}
	if m, ok := info.Model("small"); !ok || m.MaxTokens != 1024 {
		t.Errorf("small = %+v, %v", m, ok)
	}
	if m, ok := info.Model("any"); !ok || m.MaxTokens != 0 {
		t.Errorf("any = %+v, %v", m, ok)
	}
	if _, ok := info.Model("big"); ok {
		t.Error("unknown alias found")
	}
	if info, _ := c.LookupTool("a.b"); info.Chat || info.Models != nil {
		t.Errorf("a.b = %+v", info)
	}
	for _, bad := range []string{
		`{"tools": [{"name": "a.b", "models": [{"alias": "x"}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": ""}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": "x"}, {"alias": "x"}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": "x", "max_tokens": -1}]}]}`,
		`{"tools": [{"name": "a.b", "chat": true, "models": [{"alias": "x", "price": 1}]}]}`,
	} {
		if _, err := ParseCatalog([]byte(bad)); err == nil {
			t.Errorf("ParseCatalog(%s) accepted", bad)
		}
	}
}
