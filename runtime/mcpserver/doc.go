// Package mcpserver offers weir's registered flows to Model Context
// Protocol clients (desktop assistants, IDEs, agent CLIs) as tools, so a
// person in such a client starts a durable, checked run as if it were one
// tool call. It is a client of the daemon (runtime/api/client): the caller
// is whoever the daemon says it is (the OS user on the socket, a token's
// owner on TCP), and everything a run does stays the daemon's business.
//
// A call starts a run with the request id the client gives (the
// weir_request_id argument or the _meta key weir/request_id), else a fresh
// one: JSON-RPC ids restart with every session, so they are never used as
// business ids. The call reports progress while the run goes on and
// answers with the run's output, or its error with code and class. A
// client that cancels (or drops) detaches: the accepted run goes on, and
// its id was the call's first progress message; cancel_run cancels a run
// explicitly. A run still working after the follow bound (55 s, below the
// clients' request timeout) is answered with its id and phase; wait_run
// follows on. A run that parks on a human wait is decided by elicitation
// where the client declared it, else answered with how to decide it
// (approve_wait, reject_wait), and followed on once decided. Read-only
// resources show a run's state and timeline.
//
// Serve speaks MCP on stdio; Handler serves the streamable HTTP transport,
// requiring a bearer token that it passes on to the daemon's TCP listener,
// so that each token sees only its owner's runs; Options.Stateless serves
// it without sessions (protocol 2026-07-28 needs that).
package mcpserver
