// Package api is weir's HTTP/JSON API under /v1/, served on the daemon's
// Unix socket and, if configured, on a TCP listener.
//
// The owner of every request comes from the transport, never from anything
// else the client sends: on the Unix socket it is the peer's OS user, read
// from the socket's peer credentials (SO_PEERCRED); on TCP it is the owner
// a bearer token maps to in the daemon's config, and a missing or unknown
// token is refused (401). The admin endpoints answer only the daemon's own
// OS user on the Unix socket.
//
// Every request is checked before its body is read: identity, API version,
// endpoint and method, query parameters. Bodies are bounded per endpoint
// and decoded strictly (unknown fields and trailing data are refused).
// Errors are JSON with a stable code, a message and a class: protocol
// errors end the request (4xx), storage errors answer 503 and keep
// admission closed until an operator acts.
//
// Requests and answers are the types of package apitypes: the server
// converts engine and store records into them (convert.go) and never
// writes a record as it is, so the wire changes only when apitypes does.
// Package client (runtime/api/client) is the Go client of this API.
package api
