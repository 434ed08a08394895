// Package registry registers flow versions: a Registry checks a set of
// files together against the registered flows and the tool catalog,
// refuses anything with a diagnostic, and stores one flows.Version (IR
// plus sources) per flow in a flows.VersionStore, keyed by Flow.Hash.
// Registrations are serialized where a cycle check needs it; the scripts
// run outside that lock, through a flows.Scripts (script.Local by
// default, runtime/sandbox in the daemon). The engine, the CLI's offline
// checks and the bench read it.
package registry
