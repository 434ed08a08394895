// Package client is a typed Go client of weir's HTTP API (/v1/), for
// applications that start and follow runs from Go, and for weir's own
// command line, benchmarks and soak.
//
// A daemon (weir serve) listens on a Unix socket, where it takes the
// caller's OS user as the owner of what the caller starts, and, if
// configured, on TCP, where every request carries a bearer token that the
// daemon's config maps to an owner. New connects to either:
//
//	c, err := client.New("unix:///run/weir/weir.sock")
//	c, err := client.New("http://weir.internal:7070", client.WithToken(token))
//
// Every method sends one request (the *All methods page through a list,
// RunWait and RunWaitUntil ask again after a held answer) and returns the answer as the types of package apitypes,
// which are the wire format and nothing else: no store record or engine
// type crosses the API, and this package needs neither.
//
// An answer that refuses the request is an *Error with the API's stable
// code (apitypes.CodeNotFound, apitypes.CodeQueueFull, ...), tested with
// errors.As or ErrorCode. Any other error means no answer came: if it
// wraps ErrNoDaemon, nothing listened and the request was not sent;
// otherwise the daemon may or may not have acted on it, and a start sent
// again with the same request id returns the same run rather than a second
// one.
package client
