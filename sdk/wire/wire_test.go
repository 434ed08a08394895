package wire

import (
	"strings"
	"testing"
)

func TestSplitToolName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, plugin, tool string
		ok                 bool
	}{
		{"memo.put", "memo", "put", true},
		{"http.post_keyed", "http", "post_keyed", true},
		{"a1-b.c_d", "a1-b", "c_d", true},
		{"memo", "", "", false},
		{".put", "", "", false},
		{"memo.", "", "", false},
		{"1memo.put", "", "", false},
		{"Memo.put", "", "", false},
		{"memo.put.x", "", "", false},
		{"me mo.put", "", "", false},
		{"../x.y", "", "", false},
		{strings.Repeat("a", 65) + ".x", "", "", false},
	} {
		p, tool, err := SplitToolName(c.name)
		if (err == nil) != c.ok || p != c.plugin || tool != c.tool {
			t.Errorf("SplitToolName(%q) = %q, %q, %v", c.name, p, tool, err)
		}
	}
}

func TestSchema(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	for in, ok := range map[string]bool{`{"n":1}`: true, `{"n":1.5}`: false, `{}`: false, `{"n":1} {}`: false, `nope`: false} {
		if err := s.Validate([]byte(in)); (err == nil) != ok {
			t.Errorf("Validate(%s) = %v", in, err)
		}
	}
	var none *Schema
	if err := none.Validate([]byte(`[1,"x"]`)); err != nil {
		t.Errorf("no schema refused JSON: %v", err)
	}
	if err := none.Validate([]byte(`[1,`)); err == nil {
		t.Error("no schema accepted broken JSON")
	}
	for _, src := range []string{`{"$ref":"https://example.com/s.json"}`, `{"$ref":"file:///etc/passwd"}`} {
		if _, err := CompileSchema(src); err == nil || !strings.Contains(err.Error(), "self-contained") {
			t.Errorf("CompileSchema(%s) = %v; external references must be refused", src, err)
		}
	}
}

func TestCheckErrorCode(t *testing.T) {
	t.Parallel()
	longest := "E" + strings.Repeat("_", MaxErrorCodeBytes-1)
	for code, ok := range map[string]bool{
		"": true, "E": true, "E_MODEL_RATE": true, "E2BIG": true, longest: true,
		longest + "X": false, "e_model": false, "_E": false, "9E": false, "E-RATE": false, "E RATE": false, "É": false,
	} {
		if err := CheckErrorCode(code); (err == nil) != ok {
			t.Errorf("CheckErrorCode(%q) = %v, want ok %v", code, err, ok)
		}
	}
}

// TestSchemaProblems: every problem is listed with the path of the value
// at fault; an unknown key's path ends with the key.
func TestSchemaProblems(t *testing.T) {
	t.Parallel()
	s, err := CompileSchema(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"integer"},"b":{"type":"object","properties":{"c":{"type":"string"}}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	probs, err := s.Problems([]byte(`{"a":"x","b":{"c":1},"zz":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range probs {
		got[strings.Join(p.Path, "/")] = true
	}
	for _, want := range []string{"a", "b/c", "zz"} {
		if !got[want] {
			t.Errorf("no problem at %s in %+v", want, probs)
		}
	}
	if probs, err := s.Problems([]byte(`{"a":1}`)); err != nil || probs != nil {
		t.Errorf("a good document: %+v, %v", probs, err)
	}
	if _, err := s.Problems([]byte(`{`)); err == nil {
		t.Error("not JSON accepted")
	}
}
