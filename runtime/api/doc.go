// Package api is weir's HTTP/JSON API under /v1/, served on the daemon's
// Unix socket. The owner of every request is the peer's OS user, read from
// the socket's peer credentials (SO_PEERCRED), never from anything the
// client sends. Errors are JSON with a stable code, a message and a class:
// protocol errors end the request (4xx), storage errors answer 503.
package api
