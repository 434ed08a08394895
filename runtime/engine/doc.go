// Package engine is weir's durable engine and its public host API: it
// accepts runs journal-first, schedules their tasks onto worker slots and
// budget slices under leases, walks each flow's graph persisting the
// continuation after every step, calls tools through the plugin host with
// the idempotency contract of docs/design.md §3, and recovers from the store after a
// crash.
//
// The store is the truth. Everything the engine keeps in memory (the
// ledger, the set of dispatched tasks, live runs' cancel functions, the
// figures) is a view that recovery rebuilds or that may start from zero.
//
// Every durable change goes through store.Update, whose functions the
// backend applies one after another: a function that reads a record and
// then writes it is serialised against every other writer, which is what
// makes the lease fence, the finish decision and the cancel answers exact.
package engine
