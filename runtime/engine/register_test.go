package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
)

// updateCounter counts the Updates that reach the store under it.
type updateCounter struct {
	store.Store
	updates atomic.Int64
}

func (c *updateCounter) Update(ctx context.Context, fn func(tx store.Tx) error) error {
	c.updates.Add(1)
	return c.Store.Update(ctx, fn)
}

func setupCounted(t *testing.T) (*testBundle, *updateCounter) {
	var c *updateCounter
	b := setupUnitOn(t, Config{}, "", func(s store.Store) store.Store {
		c = &updateCounter{Store: s}
		return c
	})
	return b, c
}

// registeredOwners maps every registered flow to its owner.
func registeredOwners(t *testing.T, e *Engine) map[string]string {
	t.Helper()
	fl, err := e.Flows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fl {
		out[f.Name] = f.Owner
	}
	return out
}

// The versions of a registration that fits one Update are stored in one:
// one durable commit per request, however many flows it declares.
func TestRegisterStoresOneUpdatePerRegistration(t *testing.T) {
	t.Parallel()
	b, c := setupCounted(t)
	var files []SourceFile
	for i := range 20 {
		src := fmt.Sprintf(`flow(name = "f%d", nodes = [task("t", tool = "kit.echo")])`+"\n", i)
		if i > 0 { // a call into the same registration
			src = fmt.Sprintf(`flow(name = "f%d", max_depth = 1, nodes = [subflow("s", flow = "f0")])`+"\n", i)
		}
		files = append(files, SourceFile{Path: fmt.Sprintf("f%d.star", i), Src: src})
	}
	before := c.updates.Load()
	res, err := b.eng.RegisterAs(context.Background(), "alice", files)
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("%v %v", err, res.Diagnostics)
	}
	if got := c.updates.Load() - before; got != 1 {
		t.Fatalf("20 flows stored in %d Updates, want 1", got)
	}
	if owners := registeredOwners(t, b.eng); len(owners) != 20 || owners["f19"] != "alice" {
		t.Fatalf("registered: %v", owners)
	}
}

// A registration larger than one Update is stored in several, each
// version whole; a name among them that belongs to someone else refuses
// the whole registration before any of it is written.
func TestRegisterLargerThanOneUpdate(t *testing.T) {
	t.Parallel()
	b, c := setupCounted(t)
	ctx := context.Background()
	big := func(name string) SourceFile {
		// Node docs (each under flows.MaxDocBytes) make the IR large and
		// the source small: six of 60,000 bytes, about a third of
		// registerUpdateBytes.
		return SourceFile{Path: name + ".star", Src: fmt.Sprintf(`flow(name = %q, nodes = [task("t%%d" %% i, tool = "kit.echo", doc = "x" * %d, next = ("t%%d" %% (i + 1)) if i < 5 else None) for i in range(6)])`+"\n", name, registerUpdateBytes/18)}
	}
	if _, err := b.eng.RegisterAs(ctx, "bob", []SourceFile{big("taken")}); err != nil {
		t.Fatal(err)
	}
	var files []SourceFile
	for i := range 8 {
		files = append(files, big(fmt.Sprintf("big%d", i)))
	}
	_, err := b.eng.RegisterAs(ctx, "alice", append(files, big("taken")))
	if ErrorCode(err) != CodeForbidden || !strings.Contains(err.Error(), `"taken"`) || !strings.Contains(err.Error(), "nothing was registered") {
		t.Fatalf("a registration with bob's name: %v", err)
	}
	if owners := registeredOwners(t, b.eng); len(owners) != 1 || owners["taken"] != "bob" {
		t.Fatalf("after the refusal: %v", owners)
	}

	before := c.updates.Load()
	res, err := b.eng.RegisterAs(ctx, "alice", files)
	if err != nil || len(res.Diagnostics) > 0 || len(res.Flows) != 8 {
		t.Fatalf("%v %v %v", err, res, res.Diagnostics)
	}
	// Three versions of a third of the bound fit no Update together.
	if got := c.updates.Load() - before; got < 4 || got > 8 {
		t.Fatalf("8 versions of %d bytes stored in %d Updates, want 4 to 8", registerUpdateBytes/3, got)
	}
	owners := registeredOwners(t, b.eng)
	for i := range 8 {
		if name := fmt.Sprintf("big%d", i); owners[name] != "alice" {
			t.Fatalf("%s: %v", name, owners)
		}
	}
	for _, f := range res.Flows { // each version reads back whole
		fe, err := b.eng.flowVersion(ctx, f.Name, f.Hash)
		if err != nil || len(fe.flow.Nodes) != 6 || len(fe.flow.Nodes[5].Doc) != registerUpdateBytes/18 {
			t.Fatalf("%s: %v", f.Name, err)
		}
	}
}

// Registering files again that were checked before, against the same
// tools and callees, sends nothing to the sandbox: the kept check answers.
// A changed file is checked in a worker again.
func TestRegisterUnchangedFilesSkipTheSandbox(t *testing.T) {
	t.Parallel()
	pool, err := sandbox.New(sandbox.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	b := setupUnit(t, Config{Scripts: pool}, "")
	ctx := context.Background()
	files := []SourceFile{
		{Path: "leaf.star", Src: `flow(name = "leaf", nodes = [task("t", tool = "kit.echo")])` + "\n"},
		{Path: "top.star", Src: `flow(name = "top", max_depth = 1, nodes = [subflow("s", flow = "leaf")])` + "\n"},
	}
	register := func(files []SourceFile) *RegisterResult {
		t.Helper()
		res, err := b.eng.RegisterAs(ctx, "alice", files)
		if err != nil || len(res.Diagnostics) > 0 {
			t.Fatalf("%v %v", err, res)
		}
		return res
	}
	first := register(files)
	requests := pool.Stats().Requests
	again := register(files)
	if got := pool.Stats().Requests; got != requests {
		t.Fatalf("unchanged files: %d sandbox requests, want none", got-requests)
	}
	if len(again.Flows) != 2 || again.Flows[1].Hash != first.Flows[1].Hash {
		t.Fatalf("again: %+v, first %+v", again.Flows, first.Flows)
	}
	files[1].Src += "# edited\n"
	register(files)
	if got := pool.Stats().Requests; got != requests+1 {
		t.Fatalf("an edited file: %d sandbox requests, want 1", got-requests)
	}
}
