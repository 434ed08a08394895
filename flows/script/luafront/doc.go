// Package luafront is the Lua front end of the flow loader: it parses and
// compiles .lua files with gopher-lua, runs them in a sandbox (no files,
// clock or randomness; an instruction limit that also counts the work of
// string builtins and pattern matching; caps on what a builtin may build),
// and hands each builtin call to the Starlark builtins through a
// front.Declarer, so that a Lua flow gets the parameters, checks,
// diagnostics and IR of a Starlark one. Its callables are front.Functions
// the core's Evaluator calls like Starlark ones.
//
// Package flows/script registers it for files whose path ends in ".lua";
// it imports only flows/script/front, never the core.
package luafront
