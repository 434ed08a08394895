package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

// TestManifestChangedAfterLaunch: a revision-2 plugin that publishes a new
// tool list has it in service without a relaunch or a rescan: a new tool
// is known to registration and callable, a removed one is refused with
// why, and a second host starting on the cache sees the latest list.
func TestManifestChangedAfterLaunch(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "relist")
	if _, ok := b.h.LookupTool("relist.a"); ok {
		t.Fatal("relist.a is known before it was published")
	}
	mustCall(t, b.h, "relist.set", `{"tools":["a","b"]}`)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := b.h.LookupTool("relist.a"); !ok {
			return errors.New("relist.a not known yet")
		}
		return nil
	})
	if res := mustCall(t, b.h, "relist.a", `{}`); string(res.Output) != `"a"` {
		t.Fatalf("relist.a answered %s", res.Output)
	}
	if got := strings.Join(b.h.Names(), ","); got != "relist.a,relist.b,relist.set" {
		t.Fatalf("names %s", got)
	}
	mustCall(t, b.h, "relist.set", `{"tools":["b"]}`)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := b.h.LookupTool("relist.a"); ok {
			return errors.New("relist.a still known")
		}
		return nil
	})
	_, err := b.h.Call(context.Background(), CallRequest{Tool: "relist.a", Input: json.RawMessage(`{}`)})
	wantKind(t, err, KindUnknownTool)
	if !strings.Contains(err.Error(), "no longer offers this tool") {
		t.Fatalf("a removed tool's call failed with %v", err)
	}
	if n := launches(b.h, "relist"); n != 1 {
		t.Fatalf("%d launches, want the one", n)
	}
	var listed []string
	for _, p := range b.h.Plugins() {
		if p.Name == "relist" {
			for _, tm := range p.Manifest.Tools {
				listed = append(listed, tm.Name)
			}
		}
	}
	if strings.Join(listed, ",") != "relist.b,relist.set" {
		t.Fatalf("Plugins lists %v", listed)
	}
	h2, err := New(Config{PluginsDir: b.pluginsDir, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, ok := h2.LookupTool("relist.b"); !ok {
		t.Fatal("the changed manifest was not cached")
	}
}

// TestRelaunchedPluginDeclaresItsListAgain: a revision-2 plugin
// relaunched after a crash serves what it declares at that launch, not
// the list its dead process had published.
func TestRelaunchedPluginDeclaresItsListAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}, "relist")
	mustCall(t, b.h, "relist.set", `{"tools":["a"]}`)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := b.h.LookupTool("relist.a"); !ok {
			return errors.New("relist.a not known yet")
		}
		return nil
	})
	old := pid(b.h, "relist")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	processEnded(t, old)
	testutil.Eventually(t, 30*time.Second, func() error {
		// A call finds the dead process (and retires it) or the new one,
		// which no longer declares relist.a; nothing publishes a list.
		_, _ = b.h.Call(context.Background(), CallRequest{Tool: "relist.a", Input: json.RawMessage(`{}`)})
		if _, ok := b.h.LookupTool("relist.a"); ok {
			return errors.New("relist.a still known after the relaunch")
		}
		return nil
	})
	if n := launches(b.h, "relist"); n != 2 {
		t.Fatalf("%d launches, want the first and one relaunch", n)
	}
}
