// Package front is what the flow loader's core (package flows/script) and
// the flow languages other than Starlark share: the interface a language's
// front end implements (Language, Program), what its builtins call at load
// time (Declarer), the call sites its diagnostics point at, the values that
// cross between a script and the runtime, the errors it reports and the
// thread locals that carry a call's reference and step limit.
//
// The core's Starlark builtins are the one implementation of flow, task,
// subflow, fanout, wait, branch and agent: a front end hands each call to
// them through a Declarer, so every language gets the same parameters,
// checks, diagnostics and IR. This package imports neither the core nor an
// interpreter other than Starlark's values, so that a front end such as
// flows/script/luafront imports it and the core imports the front end,
// without a cycle.
package front
