// Package daemon is weir's composition root: the one place that builds a
// daemon's parts from a config — the store, the plugin host, the script
// sandbox, the engine, and for a serving daemon the API on its listeners
// (the socket, TCP, the console, metrics) — starts them in one order and
// stops them in the reverse, and answers what the API asks of the daemon
// itself (its config, a reload, a plugin rescan, the audit stream).
//
// `weir serve` runs a Daemon until it is told to stop; `weir exec` opens
// one without listeners to run a flow in process. The order is the
// contract: the store opens first and closes last but for the sandbox;
// the engine is started (recovery included) only once the host and the
// sandbox are up, and on Close it drains first — admission closed, held
// work given its grace, every record written — before the listeners
// close and the plugins are stopped.
package daemon
