// Package render draws a flow's graph: Render writes a flows.Flow as
// Mermaid, Graphviz DOT or a self-contained SVG, with the state of a run
// (visited, current, waiting, failed, cancelled nodes) as marks. It reads
// only the IR, so the API, the console and `weir flow graph` draw graphs
// without compiling an interpreter.
package render
