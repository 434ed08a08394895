package engine

import (
	"reflect"
	"testing"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/telemetry"
)

// A log line about a run carries its trace id, so a collector joins the
// line to the run's spans: the one kept on the run, else (a run accepted
// before it was kept) the one derived from its id, as its spans are.
func TestRunFieldsCarryTheTrace(t *testing.T) {
	t.Parallel()
	kept := runFields(&store.Run{ID: "run_a", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}, "task", "t1")
	if want := []any{"run", "run_a", "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736", "task", "t1"}; !reflect.DeepEqual(kept, want) {
		t.Errorf("runFields = %v, want %v", kept, want)
	}
	old := runFields(&store.Run{ID: "run_b"})
	if want := []any{"run", "run_b", "trace_id", telemetry.TraceID("run_b").String()}; !reflect.DeepEqual(old, want) {
		t.Errorf("runFields = %v, want %v", old, want)
	}
}

// A step's log line also names the node it is at and that visit's span
// id, the span its calls are children of; a step past the graph's end
// names no node.
func TestStepLogFieldsCarryTheVisitSpan(t *testing.T) {
	t.Parallel()
	s := &stepper{run: &store.Run{ID: "run_a", Attempt: 2}, cont: &continuation{Node: "fetch", Visits: map[string]int{"fetch": 3}}}
	span := telemetry.SpanID(telemetry.SpanKey{Run: "run_a", Node: "fetch", Visit: 3, Attempt: 2}).String()
	want := []any{"run", "run_a", "trace_id", telemetry.TraceID("run_a").String(), "node", "fetch", "span_id", span, "error", "x"}
	if got := s.logFields("error", "x"); !reflect.DeepEqual(got, want) {
		t.Errorf("logFields = %v, want %v", got, want)
	}
	s.cont.Node = ""
	if got := s.logFields(); len(got) != 4 {
		t.Errorf("logFields past the graph = %v", got)
	}
}

// A reload keeps the host id: the holder of the daemon's service leases
// (a trace export, schedules) and the host its started records name. A
// reload that dropped it left the trace-export lease to the holder that
// no longer exists until it expired, and started records naming a host
// no probe of this data directory is trusted for.
func TestUnitReloadKeepsTheHostID(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{HostID: "host-a"}, echoFlow)
	if got := hostOf(b.eng); got != "host-a" {
		t.Fatalf("host before the reload %q", got)
	}
	b.eng.Reload(Config{Workers: 3})
	if got := hostOf(b.eng); got != "host-a" {
		t.Errorf("host after a reload %q, want host-a", got)
	}
}
