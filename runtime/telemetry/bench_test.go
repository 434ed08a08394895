package telemetry

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// tenSteps is the timeline of a run of ten tasks in one lease, the bench's
// flow (runtime/engine's BenchmarkDurableSteps).
func tenSteps() timeline {
	tl := start("ten").add("queued", "s0", 1, nil).add(EvLeased, "s0", 1, nil)
	for i := range 10 {
		tl = tl.add(EvNodeDone, fmt.Sprint("s", i), 1, map[string]any{"tool": "testkit.echo", "cost": 0})
	}
	return tl.add(EvCompleted, "", 1, nil)
}

// BenchmarkBuild is the export service's work per run before the SDK:
// building a ten-step run's spans from its timeline.
func BenchmarkBuild(b *testing.B) {
	tl := tenSteps()
	for b.Loop() {
		if _, err := Build(tl); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExport adds the SDK: the ten-step run's spans through the
// tracer provider and batch processor to an in-memory exporter, flushed.
func BenchmarkExport(b *testing.B) {
	mem := tracetest.NewInMemoryExporter()
	x := NewWithExporter(mem, Options{Sample: 1})
	defer x.Shutdown(context.Background())
	spans, err := Build(tenSteps())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if err := x.Export(ctx, spans); err != nil {
			b.Fatal(err)
		}
		mem.Reset()
	}
}
