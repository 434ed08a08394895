// Package flows is weir's flow languages: it loads Starlark (.star) and Lua
// (.lua) scripts that declare task graphs with the same builtins, compiles
// them to one graph IR, checks them statically at
// registration, and evaluates the scripts' callables at run time against a
// read-only context. The runtime walks the IR; it never reads flow scripts
// from disk, only from the stored source by content hash.
//
// Loading and checking: Load runs a set of files together in a sandbox (no
// clock, randomness, files or network; load() only among the set; a step
// limit per execution) and returns a Module with the flows they declare and
// Diagnostics for every problem found in them. Check adds the checks that
// need a tool Catalog and the other flows. A Registry does the same against
// the registered flows, refuses anything with a diagnostic, and stores one
// Version (IR plus sources) per flow in a VersionStore, keyed by Flow.Hash.
//
// Running: the IR keeps every callable the script passed to a builtin as a
// CallableRef. NewEvaluator re-runs a version's stored sources and resolves
// those refs; Evaluator.Call evaluates one with a Context. An Evaluator is
// immutable and safe for concurrent use; build one per Flow.SourceHash and
// share it. A Cache does that for a runtime: it decodes each stored IR once,
// builds each evaluator once however many callers miss together, shares it
// among the versions of one source, and bounds the memory they hold.
//
// Diagnostics carry a file:line:col position, a stable Code (E_CYCLE, ...),
// a message and, for cycles and depth, the chain. docs/flows.md documents
// the language for flow authors.
package flows
