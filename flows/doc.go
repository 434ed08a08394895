// Package flows is weir's flow IR: the graph a flow script compiles to
// (Flow, Node, CallableRef) and what a file declares beside its flows to
// start them by themselves (Schedule, Trigger), the Diagnostics
// registration reports, the limits a script runs under and the errors that name them, the
// Version a registry stores, the tool Catalog registration checks
// against (ToolInfo: what a tool declares), the validation of values
// against the schemas flows declare, and the Scripts boundary between the
// runtime and whatever evaluates scripts (its request and result shapes).
//
// It imports no interpreter, so everything that only reads flows — the
// engine's graph walk, the API, the console, the renderers, the CLI's
// listings — compiles without Starlark or Lua (a test holds it to that).
// The packages beside it serve one reader each:
//
//   - flows/script loads Starlark (.star) and Lua (.lua) files into this IR,
//     runs the static checks, and evaluates the scripts' callables (Load,
//     Check, Evaluator, Cache, Local);
//   - flows/registry checks files against the registered flows and stores
//     one Version per flow;
//   - flows/render draws a Flow as Mermaid, DOT or SVG.
//
// Diagnostics carry a file:line:col position, a stable Code (E_CYCLE, ...),
// a message and, for cycles and depth, the chain. docs/flows.md documents
// the language for flow authors.
package flows
