package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store"
)

func TestMain(m *testing.M) {
	sandbox.ServeIfWorker() // this binary is the sandbox's worker
	testutil.Main(m, testutil.Plugins("testkit"))
}

// options are a daemon's on a fresh data directory with the testkit
// plugin pinned.
func options(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if _, err := host.Install(plugins, testutil.Plugin(t, "testkit"), nil); err != nil {
		t.Fatal(err)
	}
	return Options{DataDir: filepath.Join(dir, "data"), PluginsDir: plugins, Logger: hclog.NewNullLogger()}
}

const sleepFlow = `flow(name = "nap", nodes = [task("t", tool = "testkit.sleep", args = {"ms": 1000})])`

// TestCloseDrainsBeforeThePluginsStop: a run whose call is in flight when
// the daemon closes completes — the engine drains, its records are
// written, and only then do the plugins stop — and a daemon opened again
// on the same directory reads it completed.
func TestCloseDrainsBeforeThePluginsStop(t *testing.T) {
	t.Parallel()
	o := options(t)
	ctx := context.Background()
	d, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := d.Engine.Register(ctx, []engine.SourceFile{{Path: "nap.star", Src: sleepFlow}}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %v %v", res, err)
	}
	st, err := d.Engine.Submit(ctx, engine.StartRequest{Owner: "alice", Flow: "nap", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func() error {
		r, err := d.Engine.Get(ctx, "alice", st.RunID)
		if err != nil || r.Phase == store.PhaseQueued {
			return fmt.Errorf("the run is not dispatched yet (%v)", err)
		}
		return nil
	})
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if h := d.Engine.Health(ctx); h.Admission != engine.CodeDraining {
		t.Fatalf("admission after Close: %+v, want %s", h, engine.CodeDraining)
	}

	d2, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close(ctx)
	r, err := d2.Engine.Get(ctx, "alice", st.RunID)
	if err != nil || r.Phase != store.PhaseCompleted || r.Attempt != 1 {
		t.Fatalf("after the close, the run: %+v %v, want completed on its first attempt", r, err)
	}
}

// TestOpenOnAHeldDirectoryLeavesNothingOpen: a second daemon on a data
// directory the first holds is refused, saying so, and closes what it
// had opened; the first serves on.
func TestOpenOnAHeldDirectoryLeavesNothingOpen(t *testing.T) {
	t.Parallel()
	o := options(t)
	ctx := context.Background()
	d, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	if _, err := Open(ctx, o); err == nil || !strings.Contains(err.Error(), "in use by a running weir daemon") {
		t.Fatalf("a second daemon on the directory: %v", err)
	}
	if h := d.Engine.Health(ctx); h.Admission != "open" {
		t.Fatalf("the first daemon after the refusal: %+v", h)
	}
	if info := d.ConfigInfo(); info.Version < 1 {
		t.Fatalf("config version %d, want one recorded", info.Version)
	}
}

// TestEmbeddedRecordsNoConfigVersion: weir exec's engine records no
// config version and reloads nothing.
func TestEmbeddedRecordsNoConfigVersion(t *testing.T) {
	t.Parallel()
	o := options(t)
	o.Embedded = true
	ctx := context.Background()
	d, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	if v := d.ConfigInfo().Version; v != 0 {
		t.Fatalf("config version %d, want none", v)
	}
	if _, err := d.Reload(ctx); engine.ErrorCode(err) != "E_NO_CONFIG" {
		t.Fatalf("reload: %v, want E_NO_CONFIG", err)
	}
}

// TestModelLabels: every model of every installed chat tool is named as
// the weir_model_* metrics label it, so its series exist before its
// first turn.
func TestModelLabels(t *testing.T) {
	t.Parallel()
	got := modelLabels([]host.ToolManifest{
		{Name: "llm.chat", Models: []host.ModelManifest{{Alias: "small"}, {Alias: "large"}}},
		{Name: "testkit.echo"},
		{Name: "other.chat", Models: []host.ModelManifest{{Alias: "x"}}},
	})
	if strings.Join(got, ",") != "llm.chat/small,llm.chat/large,other.chat/x" {
		t.Fatalf("labels %v", got)
	}
}
