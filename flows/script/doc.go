// Package script runs flow scripts: it loads Starlark (.star) and Lua
// (.lua) files that declare task graphs with the same builtins, compiles
// them to the IR of package flows, checks them statically, and evaluates
// the scripts' callables at run time against a read-only context. With its
// front ends it is where the interpreters come in; readers of the IR import
// flows alone.
//
// Languages: this package runs Starlark itself, and its Starlark builtins
// are the one implementation of flow, task, subflow, fanout, wait, branch,
// agent, schedule and on_event. A file of another language goes, by the ending of its path,
// to that language's front end (a front.Language: Lua's is
// flows/script/luafront), whose builtins call the Starlark ones through a
// front.Declarer. Package flows/script/front holds what both sides share
// and imports neither, so this package imports the front ends without a
// cycle.
//
// Loading and checking: Load runs a set of files together in a sandbox (no
// clock, randomness, files or network; load() only among the set; a step
// limit per execution) and returns a flows.Module with the flows they
// declare and Diagnostics for every problem found in them. Check adds the
// checks that need a tool Catalog and the other flows; flows/registry
// does the same against the registered flows through a flows.Scripts,
// which Local implements in this process and runtime/sandbox in worker
// processes.
//
// Running: the IR keeps every callable the script passed to a builtin as a
// CallableRef. NewEvaluator re-runs a version's stored sources and resolves
// those refs; Evaluator.Call evaluates one with a flows.Context. An
// Evaluator is immutable and safe for concurrent use; build one per
// Flow.SourceHash and share it. A Cache does that for a runtime: it decodes
// each stored IR once, builds each evaluator once however many callers miss
// together, shares it among the versions of one source, and bounds the
// memory they hold.
package script
