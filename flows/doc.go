// Package flows is weir's flow language: it loads Starlark scripts that
// declare task graphs, compiles them to a graph IR, checks them statically at
// registration, and evaluates the scripts' callables at run time against a
// read-only context. The runtime walks the IR; it never reads flow scripts
// from disk, only from the stored source by content hash.
package flows
