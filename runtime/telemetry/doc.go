// Package telemetry turns a run's journal into OpenTelemetry traces.
//
// Span identity comes from the journal, never from the process that
// happened to run a step (DESIGN §12, "Identity from the journal"): a
// run's trace id is a hash of its run id (TraceID; a caller's traceparent
// journaled at acceptance takes its place, see traceParent), and each
// span id is a hash of what the journal says the span is — the run, the
// node, its visit and its lease attempt, a wait's id (SpanID). Build is a
// pure function from a run's timeline to span records, so a daemon that
// recovers a run after kill -9, or exports it a second time, derives the
// same trace with the same ids, and a span the timeline shows cut by a
// kill (a visit whose lease expired, or that a new lease took over,
// without its end) is closed with status Error, "interrupted by restart"
// and weir.interrupted = true rather than left open or emitted twice.
//
// Spans are built only once a run has its terminal record, and exported
// once: the engine's trace-export service reads the trace outbox (a
// pseudo run's timeline that the terminal transaction appends to when
// tracing is on) and removes an entry only after the run's spans were
// flushed to the collector. A kill between the terminal commit and the
// export loses nothing (the entry is still there); a kill between the
// export and the removal exports the run again with identical trace and
// span ids, the one duplicate this scheme allows.
//
// Exporter is the OpenTelemetry SDK's side: a TracerProvider whose id
// generator hands out the derived ids and whose batch processor has a
// bounded queue in front of the OTLP exporter (HTTP or gRPC), so export
// never blocks a step and what it drops is counted.
package telemetry
