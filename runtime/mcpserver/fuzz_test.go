package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// FuzzToolListing offers a flow with an arbitrary input schema and doc
// beside a plain one: listing the tools never panics, the plain flow is
// always offered, and every tool listed is bounded.
func FuzzToolListing(f *testing.F) {
	for _, props := range badHeaderSchemas {
		f.Add([]byte(`{"type":"object","properties":`+props+`}`), "doc")
	}
	for _, seed := range []string{``, `null`, `{}`, `[]`, `"x"`, `{"type":"array"}`, `{"type":"object","properties":5}`,
		`{"type":"object","properties":{"a":{"type":["string","null"],"x-mcp-header":"X"}}}`,
		`{"type":"object","type":"array"}`, `{"type":"\u006fbject"}`, `{"type":"object","properties":{"a":{"properties":{"b":{"type":"boolean","x-mcp-header":"é"}}}}}`} {
		f.Add([]byte(seed), "line one\nline two")
	}
	f.Fuzz(func(t *testing.T, schema []byte, doc string) {
		fl := apitypes.Flow{Name: "fuzzed", Hash: "h1", Doc: doc, Nodes: 1}
		if json.Valid(schema) {
			fl.Input = schema // the daemon only sends JSON
		}
		d := &daemonStub{}
		d.setFlows(fl, objectFlow("plain", `{}`))
		cs := connect(t, New(d, Options{}))
		var names []string
		for tl, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			names = append(names, tl.Name)
			b, _ := json.Marshal(tl.InputSchema)
			if len(b) > MaxToolSchemaBytes+1024 || len(tl.Description) > flows.MaxDocSummaryBytes+100 {
				t.Fatalf("%s: schema %d bytes, description %d", tl.Name, len(b), len(tl.Description))
			}
		}
		if !slices.Contains(names, "plain") || !slices.Contains(names, CancelRunTool) {
			t.Fatalf("tools %v", names)
		}
	})
}
