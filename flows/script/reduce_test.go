package script

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
)

// reduce may take the items as a third parameter; a fourth is refused.
func TestReduceMayTakeItems(t *testing.T) {
	t.Parallel()
	tools := flows.MapCatalog{"t.idem": {Name: "t.idem", Idempotent: true}}
	for _, tc := range []struct {
		reduce, want string
	}{
		{"lambda ctx, results: results", ""},
		{"lambda ctx, results, items: items", ""},
		{"lambda ctx, results, items = None: items", ""},
		{"lambda ctx, results, items, more: items", "reduce is called as reduce(ctx, results) or reduce(ctx, results, items), but the lambda takes 4 parameters"},
		{"lambda ctx: 1", "takes 1 parameter"},
	} {
		src := `flow(name = "f", nodes = [fanout("fan", items = [1, 2], tool = "t.idem", width = 2, depth = 1, max_items = 2, reduce = ` + tc.reduce + `)])`
		_, ds := Check([]flows.File{{Path: "f.star", Src: []byte(src)}}, tools)
		switch {
		case tc.want == "" && len(ds) > 0:
			t.Errorf("%s: %v", tc.reduce, ds)
		case tc.want != "" && (len(ds) != 1 || ds[0].Code != flows.CodeInvalid || !strings.Contains(ds[0].Message, tc.want)):
			t.Errorf("%s: %v, want E_INVALID %q", tc.reduce, ds, tc.want)
		}
	}
}
