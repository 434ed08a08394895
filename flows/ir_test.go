package flows

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestIRDecodingRefusesOtherVersions(t *testing.T) {
	t.Parallel()
	var f Flow
	if err := json.Unmarshal([]byte(`{"ir_version": 5, "name": "x", "nodes": []}`), &f); err == nil {
		t.Error("a newer IR version was accepted")
	}
	if err := json.Unmarshal([]byte(`{"ir_version": 0, "name": "x", "nodes": []}`), &f); err == nil {
		t.Error("IR version 0 was accepted")
	}
	if err := json.Unmarshal([]byte(`{"ir_version": 1, "name": "x", "nodes": [null]}`), &f); err == nil {
		t.Error("a null node was accepted")
	}
	if err := json.Unmarshal([]byte(`{"ir_version": 1, "nodes": [{"id": "a", "timeout": "soon"}]}`), &f); err == nil {
		t.Error("a bad duration was accepted")
	}
}

func TestNodeLookupWithoutIndex(t *testing.T) {
	t.Parallel()
	f := &Flow{Nodes: []*Node{{ID: "a"}, {ID: "b"}}}
	if f.Node("b") != f.Nodes[1] || f.Node("c") != nil {
		t.Error("linear lookup")
	}
	if got := len(f.Calls()); got != 0 {
		t.Errorf("calls %d", got)
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	good := map[string]time.Duration{
		"30s": 30 * time.Second, "10m": 10 * time.Minute, "2h": 2 * time.Hour, "250ms": 250 * time.Millisecond,
		"30d": 30 * day, "1d12h": day + 12*time.Hour, "1d1h1m1s": day + time.Hour + time.Minute + time.Second,
		"1.5h": 90 * time.Minute, "0s": 0, "-5s": -5 * time.Second, "-1d": -day,
	}
	for s, want := range good {
		got, err := ParseDuration(s)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
		if back, err := ParseDuration(FormatDuration(want)); err != nil || back != want {
			t.Errorf("FormatDuration(%v) = %q does not parse back: %v, %v", want, FormatDuration(want), back, err)
		}
	}
	for _, s := range []string{"", "d", "1.5d", "1h2d", "10", "soon", "1d-5s", "1d+5s", "99999999d", "5 m"} {
		if got, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", s, got)
		}
	}
	for d, want := range map[time.Duration]string{30 * day: "30d", 10 * time.Minute: "10m0s", day + time.Hour: "1d1h0m0s", -day: "-1d", 0: "0s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseCatalog(t *testing.T) {
	t.Parallel()
	c, err := ParseCatalog([]byte(`{"tools": [{"name": "a.b", "idempotent": true, "cost": 3, "input_schema": {"type": "object"}}, {"name": "c.d"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := c.LookupTool("a.b"); !ok || !info.Idempotent || info.Cost != 3 || string(info.InputSchema) != `{"type": "object"}` {
		t.Errorf("a.b = %+v", info)
	}
	if info, ok := c.LookupTool("c.d"); !ok || info.Idempotent || info.InputSchema != nil {
		t.Errorf("c.d = %+v", info)
	}
	if _, ok := c.LookupTool("x"); ok {
		t.Error("unknown tool found")
	}
	if got := strings.Join(c.Names(), ","); got != "a.b,c.d" {
		t.Errorf("names %s", got)
	}
	for _, bad := range []string{
		`{"tools": [{"name": ""}]}`,
		`{"tools": [{"name": "a"}, {"name": "a"}]}`,
		`{"tools": [{"name": "a", "cost": -1}]}`,
		`{"tools": [{"name": "a", "idempotant": true}]}`,
		`{"tools": []} {}`,
		`[`,
	} {
		if _, err := ParseCatalog([]byte(bad)); err == nil {
			t.Errorf("ParseCatalog(%s) accepted", bad)
		}
	}
	if _, err := LoadCatalogFile("testdata/no-such-catalog.json"); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}

func TestDiagnosticsJSON(t *testing.T) {
	t.Parallel()
	ds := Diagnostics{{Pos: Pos{File: "a.star", Line: 3, Col: 5}, Code: CodeCycle, Message: "subflow cycle a -> b -> a", Chain: []string{"a", "b", "a"}}}
	var b strings.Builder
	if err := ds.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"file": "a.star", "line": 3.0, "col": 5.0, "code": "E_CYCLE", "message": "subflow cycle a -> b -> a", "chain": []any{"a", "b", "a"}}
	if len(back) != 1 || !reflect.DeepEqual(back[0], want) {
		t.Errorf("JSON %s", b.String())
	}
	b.Reset()
	if err := Diagnostics(nil).WriteJSON(&b); err != nil || b.String() != "[]\n" {
		t.Errorf("empty: %q %v", b.String(), err)
	}
	if ds.Err() == nil || Diagnostics(nil).Err() != nil || ds.Err().Error() != "a.star:3:5: E_CYCLE: subflow cycle a -> b -> a" {
		t.Errorf("Err: %v", ds.Err())
	}
}

// IR stored before agents existed (version 1) still decodes, to the same
// nodes.
func TestIRDecodesVersion1(t *testing.T) {
	t.Parallel()
	const v1 = `{"ir_version": 1, "name": "old", "max_depth": 8, "entry": "a", "hash": "h", "source_hash": "s",
		"pos": {"file": "old.star", "line": 1, "col": 1},
		"nodes": [{"id": "a", "kind": "task", "pos": {"file": "old.star", "line": 2, "col": 5},
		           "tool": "t.idem", "retries": 2, "timeout": "1m0s", "next": "b"},
		          {"id": "b", "kind": "subflow", "pos": {"file": "old.star", "line": 3, "col": 5}, "flow": "leaf"}]}`
	var f Flow
	if err := json.Unmarshal([]byte(v1), &f); err != nil {
		t.Fatal(err)
	}
	a, b := f.Node("a"), f.Node("b")
	if a == nil || a.Tool != "t.idem" || a.Retries != 2 || a.Timeout != time.Minute || a.Next != "b" {
		t.Errorf("node a decoded as %+v", a)
	}
	if b == nil || b.Kind != KindSubflow || b.Flow != "leaf" || len(f.Calls()) != 1 {
		t.Errorf("node b decoded as %+v", b)
	}
	again, err := json.Marshal(&f)
	if err != nil || !strings.Contains(string(again), `"ir_version":4`) {
		t.Errorf("re-encoded as %s (%v), want the current version", again, err)
	}
}
