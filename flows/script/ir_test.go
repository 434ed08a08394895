package script

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
)

func TestIRJSONRoundTrip(t *testing.T) {
	t.Parallel()
	m, ds := Check(flowtest.ReadFiles(t, "testdata/check/clean.star"), flowtest.Catalog(t, "testdata/catalog.json"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	for _, f := range m.Flows {
		back, data := flowtest.JSONRoundTrip[flows.Flow](t, f)
		again, _ := json.Marshal(&back)
		if string(again) != string(data) {
			t.Errorf("%s: encoding is not stable:\n%s\n%s", f.Name, data, again)
		}
		for i, n := range f.Nodes {
			got := back.Nodes[i]
			want := *n
			want.Site = nil // positions of arguments are for diagnostics only
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("%s.%s: decoded %+v, want %+v", f.Name, n.ID, *got, want)
			}
			if back.Node(n.ID) != got {
				t.Errorf("%s: decoded flow's index misses node %s", f.Name, n.ID)
			}
		}
	}
}

// The encoded IR is readable: durations as strings, snake_case names. A
// golden file shows the whole encoding of the research example.
func TestIRJSONGolden(t *testing.T) {
	t.Parallel()
	m := mustLoad(t, flowtest.ReadFiles(t, "../../examples/research.star"))
	data, err := json.MarshalIndent(m.Flow("research"), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	flowtest.Golden(t, "testdata/research.ir.json", append(data, '\n'))
	for _, s := range []string{`"deadline": "10m0s"`, `"timeout": "30d"`, `"at_most_once": true`, `"ir_version": 4`, `"projections"`} {
		if !strings.Contains(string(data), s) {
			t.Errorf("encoding lacks %s", s)
		}
	}
}

func TestValidateInput(t *testing.T) {
	t.Parallel()
	m := mustLoad(t, flowtest.ReadFiles(t, "../../examples/summarize.star"))
	f := m.Flow("summarize")
	if err := f.ValidateInput(map[string]any{"hits": []any{1, "x"}}); err != nil {
		t.Errorf("valid input refused: %v", err)
	}
	err := f.ValidateInput(map[string]any{"hits": "nope"})
	if err == nil || !strings.Contains(err.Error(), "at '/hits'") || strings.Contains(err.Error(), "\n") {
		t.Errorf("invalid input: %v", err)
	}
	if err := f.ValidateInput(map[string]any{}); err == nil {
		t.Error("missing required field accepted")
	}
	// Decoded flows validate the same way.
	back, _ := flowtest.JSONRoundTrip[flows.Flow](t, f)
	if err := back.ValidateInput(map[string]any{"hits": 3}); err == nil {
		t.Error("decoded flow accepted an invalid input")
	}
	// No schema: anything goes.
	if err := (&flows.Flow{Name: "free"}).ValidateInput(func() {}); err != nil {
		t.Errorf("no schema: %v", err)
	}
}
