package api

// Refusal codes of the API layer itself, beside the engine's (engine.Code*).
// They cross the wire in an error body's "code" and clients test them, so
// their text never changes.
const (
	CodeIdentity   = "E_IDENTITY"    // the caller's identity cannot be established
	CodeAPIVersion = "E_API_VERSION" // the path names an API version this daemon does not speak
	CodeNoRoute    = "E_NO_ROUTE"    // no such endpoint
	CodeMethod     = "E_METHOD"      // the endpoint exists but not with this method
	CodeTooLarge   = "E_TOO_LARGE"   // the body exceeds the endpoint's limit
	CodeForbidden  = "E_FORBIDDEN"   // an admin endpoint called by someone else than the daemon's user
	CodeConfig     = "E_CONFIG"      // a reload candidate is invalid or needs a restart
	CodeNoConfig   = "E_NO_CONFIG"   // the daemon has no config file to reload
	CodeInternal   = "E_INTERNAL"    // the engine failed with an error it did not classify
)
