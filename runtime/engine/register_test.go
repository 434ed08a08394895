package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir/flows"
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
	out := map[string]string{}
	for p := (FlowListParams{}); ; {
		fl, err := e.Flows(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fl {
			out[f.Name] = f.Owner
		}
		if len(fl) < MaxFlowListLimit {
			return out
		}
		p.After = fl[len(fl)-1].Name
	}
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
		fe, err := b.eng.book.version(ctx, f.Name, f.Hash)
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

// A flow listing is bounded however large the docs and schemas behind it:
// docs are summary lines (also those of versions stored before docs were
// bounded, with 7 MB docs), a schema over MaxListedInputBytes is omitted,
// and pages are at most MaxFlowListLimit. The flow's own read is whole.
func TestFlowListingIsBounded(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	ctx := context.Background()
	bigDoc := "First line of a long doc.\n" + strings.Repeat("y", flows.MaxDocBytes-100)
	bigInput := `{"type": "object", "properties": {"a": {"type": "string", "description": "` + strings.Repeat("z", MaxListedInputBytes) + `"}}}`
	var src strings.Builder
	for i := range MaxFlowListLimit + 5 {
		input, doc := "None", `"First line of a long doc.\nmore"`
		if i == 0 {
			input = "json.decode(BIG_INPUT)"
		}
		if i < 5 {
			doc = "BIG_DOC"
		}
		fmt.Fprintf(&src, "flow(name = \"f%03d\", doc = %s, input = %s, nodes = [task(\"t\", tool = \"kit.echo\")])\n", i, doc, input)
	}
	res, err := b.eng.Register(ctx, []SourceFile{{Path: "many.star", Src: fmt.Sprintf("BIG_DOC = %q\nBIG_INPUT = %q\n", bigDoc, bigInput) + src.String()}})
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatal(err, res.Diagnostics)
	}
	// Versions stored before docs were bounded: f000's IR with a 7 MB doc.
	var ir map[string]any
	var v *store.FlowVersion
	if err := b.st.View(ctx, func(tx store.Tx) (err error) { v, err = tx.FlowVersionLatest("f001"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(v.IR, &ir); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		name, hash := fmt.Sprintf("old%d", i), fmt.Sprintf("oldhash%d", i)
		ir["name"], ir["hash"], ir["doc"] = name, hash, strings.Repeat("x", 7000000)
		raw, _ := json.Marshal(ir)
		if err := b.st.Update(ctx, func(tx store.Tx) error {
			return tx.FlowVersionPut(&store.FlowVersion{Name: name, Hash: hash, IR: raw, RegisteredAt: unitEpoch})
		}); err != nil {
			t.Fatal(err)
		}
	}

	var all []RegisteredFlow
	pages, bytes := 0, 0
	for p := (FlowListParams{Limit: 1000}); ; pages++ {
		fl, err := b.eng.Flows(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(fl) > MaxFlowListLimit {
			t.Fatalf("a page of %d flows", len(fl))
		}
		raw, _ := json.Marshal(fl)
		bytes = max(bytes, len(raw))
		all = append(all, fl...)
		if len(fl) < MaxFlowListLimit {
			break
		}
		p.After = fl[len(fl)-1].Name
	}
	if len(all) != MaxFlowListLimit+5+4 || pages != 1 {
		t.Fatalf("%d flows in %d pages", len(all), pages+1)
	}
	for _, f := range all {
		if len(f.Doc) > flows.MaxDocSummaryBytes || (strings.HasPrefix(f.Name, "f") && f.Doc != "First line of a long doc.") {
			t.Fatalf("%s: doc %.40q… (%d bytes) in a listing", f.Name, f.Doc, len(f.Doc))
		}
		if (f.Name == "f000") != f.InputOmitted || (f.InputOmitted && f.Input != nil) {
			t.Fatalf("%s: input omitted %v, %d bytes", f.Name, f.InputOmitted, len(f.Input))
		}
	}
	if bytes > 64<<10 {
		t.Fatalf("a page of %d bytes", bytes)
	}
	// The flow's own read carries the doc and the schema whole.
	for name, doc := range map[string]string{"old2": strings.Repeat("x", 7000000), "f000": bigDoc} {
		fs, err := b.eng.FlowSource(ctx, name, "")
		if err != nil || fs.Doc != doc {
			t.Fatalf("%s's own read: %v, doc of %d bytes", name, err, len(fs.Doc))
		}
	}
	if fs, _ := b.eng.FlowSource(ctx, "f000", ""); len(fs.Input) < MaxListedInputBytes {
		t.Fatalf("f000's own read has an input of %d bytes", len(fs.Input))
	}
}
