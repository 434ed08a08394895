package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/render"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// The listing's bounds are the engine's: the API only carries them.
func TestFlowListBoundsAgree(t *testing.T) {
	t.Parallel()
	if apitypes.MaxFlowListLimit != engine.MaxFlowListLimit || apitypes.MaxListedInputBytes != engine.MaxListedInputBytes ||
		apitypes.DefaultFlowListLimit > apitypes.MaxFlowListLimit {
		t.Fatal("apitypes and engine disagree on the bounds of a flow listing")
	}
}

// GET /v1/flows pages by name and carries docs as summary lines: alice
// registers many flows with long docs; bob's listing is paged, bounded
// and whole, the flow's own read carries the doc, and a bad page is
// refused with E_BAD_REQUEST.
func TestFlowListPages(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	unix, alice := newClients(t, b)
	bob, err := client.New(b.tcpURL, client.WithToken(bobToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	ctx := context.Background()
	before, err := unix.FlowList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long := "Summary of a long doc.\n" + strings.Repeat("d", flows.MaxDocBytes-100)
	var src strings.Builder
	fmt.Fprintf(&src, "LONG = %q\n", long)
	const n = 2*apitypes.MaxFlowListLimit + 3
	for i := range n {
		fmt.Fprintf(&src, "flow(name = \"page%03d\", doc = LONG, nodes = [task(\"t\", tool = \"testkit.echo\")])\n", i)
	}
	if _, err := alice.FlowRegister(ctx, apitypes.SourceFile{Path: "many.star", Src: src.String()}); err != nil {
		t.Fatal(err)
	}

	all, err := bob.FlowList(ctx)
	if err != nil || len(all) != len(before)+n {
		t.Fatalf("bob lists %d flows (%v), want %d", len(all), err, len(before)+n)
	}
	seen := map[string]bool{}
	for _, f := range all {
		if seen[f.Name] {
			t.Fatalf("%s listed twice", f.Name)
		}
		seen[f.Name] = true
		if strings.HasPrefix(f.Name, "page") && (f.Doc != "Summary of a long doc." || f.Owner != "alice") {
			t.Fatalf("%s: doc %.40q (%d bytes), owner %q", f.Name, f.Doc, len(f.Doc), f.Owner)
		}
	}

	get := func(query string) (int, []apitypes.Flow, []byte) {
		t.Helper()
		resp, err := b.unix.Get("http://weir/v1/flows" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var fl []apitypes.Flow
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &fl); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, fl, body
	}
	// Without parameters (a client from before paging): the first page.
	status, first, body := get("")
	if status != http.StatusOK || len(first) != apitypes.DefaultFlowListLimit || len(body) > 64<<10 {
		t.Fatalf("GET /v1/flows: %d, %d flows, %d bytes", status, len(first), len(body))
	}
	if _, page, _ := get("?limit=3&after=page010"); len(page) != 3 || page[0].Name != "page011" || page[2].Name != "page013" {
		t.Fatalf("a page after page010: %+v", page)
	}
	for _, q := range []string{"?limit=0", fmt.Sprintf("?limit=%d", apitypes.MaxFlowListLimit+1), "?limit=x", "?after=%00", "?after=" + strings.Repeat("a", 70000), "?cursor=x"} {
		if status, _, body := get(q); status != http.StatusBadRequest || !strings.Contains(string(body), apitypes.CodeBadRequest) {
			t.Errorf("GET /v1/flows%.40s: %d %.200s", q, status, body)
		}
	}
	// The flow's own read carries the doc whole.
	fs, err := bob.FlowSource(ctx, "page007")
	if err != nil || fs.Doc != long {
		t.Fatalf("page007's own read: %v, doc of %d bytes", err, len(fs.Doc))
	}
}

// A flow the renderer panics on answers its own graph request with
// E_FLOW_UNREADABLE (500), not the caller's E_BAD_REQUEST, and the
// server goes on.
func TestWriteGraphOfABrokenFlow(t *testing.T) {
	t.Parallel()
	broken := &flows.Flow{Name: "broken", Nodes: []*flows.Node{nil}}
	for _, format := range []string{"", render.FormatDot, render.FormatSVG} {
		w := httptest.NewRecorder()
		writeGraph(w, httptest.NewRequest(http.MethodGet, "/v1/flows/broken/graph?format="+format, nil), broken, nil)
		if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), engine.CodeFlowUnreadable) || w.Body.Len() > 4096 {
			t.Errorf("format %q: %d %.300s", format, w.Code, w.Body.String())
		}
	}
	w := httptest.NewRecorder()
	writeGraph(w, httptest.NewRequest(http.MethodGet, "/v1/flows/broken/graph?format=png", nil), broken, nil)
	if w.Code != http.StatusBadRequest {
		t.Errorf("an unknown format: %d", w.Code)
	}
}
