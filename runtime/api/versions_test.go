package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/engine"
)

// TestFlowVersions: a flow name's versions are listed newest first with
// their number, hash, time and owner, to every user; any version's source
// and graph read back by hash; an unknown name or hash is E_UNKNOWN_FLOW.
func TestFlowVersions(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	_, ac := newClients(t, b)
	ctx := context.Background()
	v2src := strings.Replace(testFlows, `{"to": "ann"}`, `{"to": "bea"}`, 1) + "\n" +
		`flow(name = "gate2", nodes = [task("only", tool = "testkit.echo")])` + "\n"
	if res, err := b.eng.Register(ctx, []engine.SourceFile{{Path: "test.star", Src: v2src}}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("registering a second version: %v %v", err, res)
	}
	vs, err := ac.FlowVersions(ctx, "gate")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || vs[0].Hash == vs[1].Hash || len(vs[1].Hash) != 64 ||
		vs[0].RegisteredAt.IsZero() || vs[0].RegisteredAt.Before(vs[1].RegisteredAt) {
		t.Fatalf("versions %+v", vs)
	}
	latest, err := ac.FlowSource(ctx, "gate")
	if err != nil || latest.Hash != vs[0].Hash || latest.Version != 2 {
		t.Fatalf("latest %+v %v", latest, err)
	}
	old, err := ac.FlowSourceAt(ctx, "gate", vs[1].Hash)
	if err != nil || old.Version != 1 || old.Hash != vs[1].Hash || len(old.Files) != 1 || old.Files[0].Src != testFlows {
		t.Fatalf("version 1: %+v %v", old, err)
	}
	if g, err := ac.FlowGraphAt(ctx, "gate", vs[1].Hash, "svg"); err != nil || !strings.Contains(g, `data-node="approve"`) {
		t.Errorf("version 1's graph: %q %v", g, err)
	}
	_, err = ac.FlowVersions(ctx, "nope")
	apiError(t, "versions of an unknown flow", err, engine.CodeUnknownFlow, http.StatusNotFound)
	_, err = ac.FlowSourceAt(ctx, "gate", strings.Repeat("0", 64))
	apiError(t, "an unknown version", err, engine.CodeUnknownFlow, http.StatusNotFound)
	// A version hash of another name is not this name's.
	g2, err := ac.FlowSource(ctx, "gate2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ac.FlowGraphAt(ctx, "gate", g2.Hash, "")
	apiError(t, "another flow's version", err, engine.CodeUnknownFlow, http.StatusNotFound)
}
