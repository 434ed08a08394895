package apitypes

// Refusal codes of the per-owner shares of a listener: who a request is
// from is known once it is read, and each owner then has its own share of
// the requests in progress and of the streams held open (docs/operators.md
// "http"). Both answer 429 with Retry-After.
const (
	// CodeTooManyRequests: the caller's owner already has as many
	// requests in progress as one owner may have
	// (http.max_requests_per_owner).
	CodeTooManyRequests = "E_TOO_MANY_REQUESTS"
	// CodeTooManyStreams: the caller's owner already holds as many
	// streams and long-poll waits open as one owner may
	// (http.max_streams_per_owner).
	CodeTooManyStreams = "E_TOO_MANY_STREAMS"
)
