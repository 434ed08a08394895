package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/internal/testutil"
)

// newBuild copies the named test plugin with bytes appended: the same
// program under another checksum, as a rebuild would be.
func newBuild(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(testutil.Plugin(t, name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, append(b, []byte("\nanother build\n")...), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A plugin installed after New is unknown until Rescan, then callable;
// Remove takes its tools away at the next Rescan.
func TestRescanAddsAndRemovesPlugins(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	if _, ok := b.h.LookupTool("mail.send"); ok {
		t.Fatal("mail.send known before it is installed")
	}
	if _, err := Install(b.pluginsDir, testutil.Plugin(t, "mail"), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.h.LookupTool("mail.send"); ok {
		t.Fatal("mail.send known before the rescan")
	}
	before := pid(b.h, "testkit")
	mustCall(t, b.h, "testkit.echo", `{}`)
	running := pid(b.h, "testkit")
	res, err := b.h.Rescan()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"mail"}) || len(res.Upgraded)+len(res.Removed) != 0 {
		t.Fatalf("rescan %+v, want mail added", res)
	}
	if _, ok := b.h.LookupTool("mail.send"); !ok || !slices.Contains(b.h.Names(), "mail.send") {
		t.Fatalf("mail.send unknown after the rescan: %v", b.h.Names())
	}
	mustCall(t, b.h, "mail.send", `{"to":"a@example.com","body":"hi"}`)
	// An unchanged plugin keeps its process.
	if before != 0 || pid(b.h, "testkit") != running {
		t.Fatalf("testkit's process changed across a rescan: %d -> %d", running, pid(b.h, "testkit"))
	}

	mailPid := pid(b.h, "mail")
	if err := Remove(b.pluginsDir, "mail"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(b.pluginsDir, "mail"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("second remove: %v, want ErrNotInstalled", err)
	}
	if _, err := os.Stat(filepath.Join(b.pluginsDir, "mail")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("binary still there after remove: %v", err)
	}
	res, err = b.h.Rescan()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Removed, []string{"mail"}) {
		t.Fatalf("rescan %+v, want mail removed", res)
	}
	_, err = call(t, b.h, "mail.send", `{"to":"a@example.com","body":"hi"}`)
	wantKind(t, err, KindUnknownTool)
	processGone(t, mailPid)
}

// An upgrade serves new calls from the new build while a call in flight
// finishes on the old process, which stops once that call ends.
func TestRescanUpgradeDrainsTheOldProcess(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var once bool
	type answer struct {
		res *CallResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := b.h.Call(ctx, CallRequest{Tool: "testkit.sleep", Input: []byte(`{"ms":600000}`), IdempotencyKey: "long",
			Progress: func(_, _ int64) {
				if !once {
					once = true
					close(started)
				}
			}})
		done <- answer{res, err}
	}()
	<-started // the call runs in the old process
	old := pid(b.h, "testkit")

	if _, err := Install(b.pluginsDir, newBuild(t, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	res, err := b.h.Rescan()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Upgraded, []string{"testkit"}) {
		t.Fatalf("rescan %+v, want testkit upgraded", res)
	}
	mustCall(t, b.h, "testkit.echo", `{}`)
	if now := pid(b.h, "testkit"); now == 0 || now == old {
		t.Fatalf("a new call ran in process %d, want a new process (the old one is %d)", now, old)
	}
	if err := syscall.Kill(old, 0); err != nil {
		t.Fatalf("the old process, with a call in flight, is gone: %v", err)
	}
	// The call in flight gets its answer from the old process (a crash
	// would say it was killed), and the old process then stops.
	cancel()
	a := <-done
	wantKind(t, a.err, KindCancelled)
	processGone(t, old)
}

// An unknown tool's diagnostic suggests the nearest installed tool, from
// the offline catalog and from the daemon's host alike.
func TestUnknownToolSuggestsAnInstalledOne(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "testkit")
	cat, err := LoadCatalog(b.pluginsDir, b.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	src := []byte(`flow(name = "f", nodes = [task("a", tool = "testkit.ecoh")])`)
	for name, c := range map[string]flows.Catalog{"catalog": cat, "host": b.h} {
		_, ds := script.Check([]flows.File{{Path: "f.star", Src: src}}, c)
		if len(ds) != 1 || ds[0].Code != flows.CodeUnknownTool || !strings.Contains(ds[0].Message, `did you mean "testkit.echo"?`) {
			t.Errorf("%s: %v", name, ds)
		}
	}
}
