package telemetry

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// setup returns an Exporter over an in-memory exporter, shut down at the
// end of the test.
func setup(t *testing.T, se sdktrace.SpanExporter) *Exporter {
	t.Helper()
	x := NewWithExporter(se, Options{Sample: 1, ServiceName: "weir-test"})
	t.Cleanup(func() { _ = x.Shutdown(context.Background()) })
	return x
}

// The SDK's spans carry the ids, parents, times and statuses Build
// derived, and the run's two exports give the same span ids.
func TestExportThroughSDK(t *testing.T) {
	t.Parallel()
	mem := tracetest.NewInMemoryExporter()
	x := setup(t, mem)
	tl := start("one").add(EvLeased, "a", 1, nil).add(EvExpired, "a", 1, nil).add(EvLeased, "a", 2, nil).
		add(EvNodeDone, "a", 2, nil).add(EvNodeDone, "b", 2, nil).add(EvCompleted, "", 2, nil)
	spans, err := Build(tl)
	if err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ {
		if err := x.Export(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
	}
	got := mem.GetSpans()
	if len(got) != 2*len(spans) {
		t.Fatalf("%d spans exported, want %d", len(got), 2*len(spans))
	}
	byID := map[string]tracetest.SpanStub{}
	for i, s := range got {
		want := spans[i%len(spans)]
		if s.SpanContext.SpanID() != want.ID || s.SpanContext.TraceID() != want.Trace {
			t.Errorf("exported span %d (%s) has ids %s/%s, want %s/%s", i, s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(), want.Trace, want.ID)
		}
		if s.Parent.SpanID() != want.Parent || !s.StartTime.Equal(want.Start) || !s.EndTime.Equal(want.End) {
			t.Errorf("exported span %d (%s): parent %s %v-%v, want %s %v-%v", i, s.Name, s.Parent.SpanID(), s.StartTime, s.EndTime, want.Parent, want.Start, want.End)
		}
		if s.Resource.String() == "" || !hasAttr(s.Resource.Attributes(), attribute.String("service.name", "weir-test")) {
			t.Errorf("span %s resource %v lacks service.name", s.Name, s.Resource)
		}
		byID[s.SpanContext.SpanID().String()] = s
	}
	cut := byID[SpanID(key("a", 1, 1)).String()]
	if cut.Status.Code != codes.Error || cut.Status.Description != Interrupted || !hasAttr(cut.Attributes, attribute.Bool("weir.interrupted", true)) {
		t.Errorf("the cut visit exported as %+v %v, want Error %q with weir.interrupted", cut.Status, cut.Attributes, Interrupted)
	}
	if x.Dropped() != 0 {
		t.Errorf("Dropped() = %d after exports that all arrived", x.Dropped())
	}
}

// A child run's root is exported with its link to the parent's root.
func TestExportLinks(t *testing.T) {
	t.Parallel()
	mem := tracetest.NewInMemoryExporter()
	x := setup(t, mem)
	spans, err := Build(timeline{}.add(EvAccepted, "", 1, map[string]any{"parent": "run_p"}).add(EvCompleted, "", 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Export(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	got := mem.GetSpans()
	if len(got) != 1 || len(got[0].Links) != 1 || got[0].Links[0].SpanContext.SpanID() != SpanID(SpanKey{Run: "run_p"}) {
		t.Errorf("exported %+v, want the root with its link to run_p's root", got)
	}
}

type refusing struct{ sdktrace.SpanExporter }

func (refusing) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector down")
}

// Spans the collector refuses are counted and the export says so, so its
// caller keeps the run for another try.
func TestExportCountsRefused(t *testing.T) {
	t.Parallel()
	x := setup(t, refusing{tracetest.NewInMemoryExporter()})
	spans, err := Build(start("one").add(EvLeased, "a", 1, nil).add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Export(context.Background(), spans); err == nil {
		t.Error("an export the collector refused returned nil")
	}
	if x.Dropped() != int64(len(spans)) {
		t.Errorf("Dropped() = %d, want %d", x.Dropped(), len(spans))
	}
}

func TestSampled(t *testing.T) {
	t.Parallel()
	mem := tracetest.NewInMemoryExporter()
	all, none := NewWithExporter(mem, Options{Sample: 1}), NewWithExporter(mem, Options{Sample: 0})
	defer all.Shutdown(context.Background())
	defer none.Shutdown(context.Background())
	half := NewWithExporter(mem, Options{Sample: 0.5})
	defer half.Shutdown(context.Background())
	n := 0
	for _, id := range []string{"run_a", "run_b", "run_c", "run_d", "run_e", "run_f", "run_g", "run_h", "run_i", "run_j"} {
		tid := TraceID(id)
		if !all.Sampled(tid) || none.Sampled(tid) {
			t.Errorf("%s: sample 1 says %t, sample 0 says %t", id, all.Sampled(tid), none.Sampled(tid))
		}
		if half.Sampled(tid) != half.Sampled(TraceID(id)) {
			t.Errorf("%s: the decision is not the same twice", id)
		}
		if half.Sampled(tid) {
			n++
		}
	}
	if n == 0 || n == 10 {
		t.Errorf("sample 0.5 took %d of 10 runs", n)
	}
}

// An endpoint URL is a base, as OTEL_EXPORTER_OTLP_ENDPOINT is.
func TestTracesURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":            "http://127.0.0.1:4318/v1/traces",
		"https://collector:4318/":          "https://collector:4318/v1/traces",
		"https://collector/otlp":           "https://collector/otlp/v1/traces",
		"https://collector:4318/v1/traces": "https://collector:4318/v1/traces",
	} {
		if got, err := tracesURL(in); err != nil || got != want {
			t.Errorf("tracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A caller's tracestate, journaled beside its traceparent, is on every
// exported span of the run; without a traceparent, or malformed, none.
func TestExportCarriesTheCallersTracestate(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tt := range []struct{ parent, state, want string }{
		{tp, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{"", "congo=t61rcWkgMzE", ""},
		{tp, "not a tracestate", ""},
	} {
		mem := tracetest.NewInMemoryExporter()
		x := setup(t, mem)
		detail := map[string]any{"tracestate": tt.state}
		if tt.parent != "" {
			detail["traceparent"] = tt.parent
		}
		tl := timeline{}.add(EvAccepted, "", 1, detail).add(EvLeased, "a", 1, nil).
			add(EvNodeDone, "a", 1, nil).add(EvCompleted, "", 1, nil)
		spans, err := Build(tl)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Export(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
		got := mem.GetSpans()
		if len(got) != len(spans) {
			t.Fatalf("%d spans exported, want %d", len(got), len(spans))
		}
		for _, s := range got {
			if ts := s.SpanContext.TraceState().String(); ts != tt.want {
				t.Errorf("parent %q state %q: span %s carries tracestate %q, want %q", tt.parent, tt.state, s.Name, ts, tt.want)
			}
		}
	}
}
