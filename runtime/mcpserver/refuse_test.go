package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// listingDaemon is a Daemon that only lists flows: the seam between the
// server and weir's API, enough for tools/list.
type listingDaemon struct{ flows []apitypes.Flow }

func (d *listingDaemon) FlowList(context.Context) ([]apitypes.Flow, error) { return d.flows, nil }
func (d *listingDaemon) RunStart(context.Context, apitypes.StartRequest) (*apitypes.StartResult, error) {
	return nil, fmt.Errorf("not in this test")
}
func (d *listingDaemon) RunGet(context.Context, string) (*apitypes.Run, error) {
	return nil, fmt.Errorf("not in this test")
}
func (d *listingDaemon) RunEvents(context.Context, string, client.EventListParams) ([]*apitypes.Event, error) {
	return nil, fmt.Errorf("not in this test")
}
func (d *listingDaemon) RunWaits(context.Context, string) ([]apitypes.HumanWait, error) {
	return nil, fmt.Errorf("not in this test")
}
func (d *listingDaemon) RunCancel(context.Context, string) (apitypes.CancelAnswer, error) {
	return "", fmt.Errorf("not in this test")
}

// listTools connects the real SDK client to the server in memory and
// answers the names tools/list gives.
func listTools(t *testing.T, s *Server) []string {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if len(tl.Description) > maxDescription+200 {
			t.Errorf("tool %s: description of %d bytes", tl.Name, len(tl.Description))
		}
	}
	return names
}

// TestAToolTheSDKRefusesIsLeftOut: one user's flow whose input schema
// the MCP SDK panics on (x-mcp-header variants its AddTool refuses) is
// left out of tools/list; the server lives on, and every other flow —
// another user's too — is listed, with a bounded description.
func TestAToolTheSDKRefusesIsLeftOut(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"type":"object","properties":{"h":{"type":"object","x-mcp-header":"X-Trace"}}}`,
		`{"type":"object","properties":{"h":{"type":"string","x-mcp-header":""}}}`,
		`{"type":"object","properties":{"h":{"type":"string","x-mcp-header":"bad header\n"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X-A"},"b":{"type":"string","x-mcp-header":"x-a"}}}`,
	} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			d := &listingDaemon{flows: []apitypes.Flow{
				{Name: "evil", Hash: "h1", Input: json.RawMessage(bad)},
				{Name: "hello", Hash: "h2", Doc: strings.Repeat("d", 1<<20)},
			}}
			s := New(d, Options{})
			if err := s.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			names := listTools(t, s)
			if slices.Contains(names, "evil") || !slices.Contains(names, "hello") || !slices.Contains(names, CancelRunTool) {
				t.Errorf("tools %v, want hello and %s without evil", names, CancelRunTool)
			}
		})
	}
}

// FuzzToolListing: whatever schema a registered flow has, offering it
// never panics the server, and the listing answers.
func FuzzToolListing(f *testing.F) {
	f.Add(`{"type":"object","properties":{"h":{"type":"object","x-mcp-header":"X"}}}`)
	f.Add(`{"type":"array"}`)
	f.Add(`{"type":"object","properties":{"a":{"properties":{"b":{"type":"integer","x-mcp-header":"X-B"}}}}}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, schema string) {
		if !json.Valid([]byte(schema)) {
			return
		}
		d := &listingDaemon{flows: []apitypes.Flow{{Name: "f", Hash: "h", Input: json.RawMessage(schema)}, {Name: "g", Hash: "h"}}}
		s := New(d, Options{})
		if err := s.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if names := listTools(t, s); !slices.Contains(names, "g") {
			t.Fatalf("tools %v lost g", names)
		}
	})
}
