package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/tool"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("testkit")) }

// testkit.once's probe tells the truth about its effect, also when the
// process was killed between the effect (its line in the log) and the
// key's record: it then reads the log, so a call the probe calls not
// happened never had its effect, and one it calls happened did, with
// the call's result. Before, the probe read only the record and a kill
// between the two made the engine call again: two effects.
func TestOnceProbeReadsTheLogWhenTheRecordIsMissing(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "testkit", "")
	p.MustCall(t, "testkit.once", `{"value":"v1"}`, "k1", nil)
	// The kill between the two writes: the effect is logged, its record
	// is not.
	if err := os.Remove(onceRecord(p.StateDir, "k1")); err != nil {
		t.Fatal(err)
	}
	res, err := p.Reconcile("testkit.once", `{"value":"v1"}`, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != tool.Happened || !strings.Contains(string(res.Output), `"v1"`) {
		t.Fatalf("probe of a logged effect without its record: %+v, want happened with its result", res)
	}
	// A call whose effect never happened is not_happened, the log
	// notwithstanding.
	res, err = p.Reconcile("testkit.once", `{"value":"v2"}`, "k2")
	if err != nil || res.Answer != tool.NotHappened {
		t.Fatalf("probe of a call never made: %+v %v", res, err)
	}
	log, err := os.ReadFile(filepath.Join(p.StateDir, OnceLog))
	if err != nil || strings.Count(string(log), "\n") != 1 {
		t.Fatalf("the log %q %v: want the one effect", log, err)
	}
}
