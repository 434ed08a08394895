package api

import "github.com/weirhq/weir/runtime/api/apitypes"

// Refusal codes of the API layer itself, beside the engine's (engine.Code*).
// They cross the wire in an error body's "code" and clients test them, so
// their text never changes; they are defined with the wire types, where
// clients find them.
const (
	CodeIdentity   = apitypes.CodeIdentity   // the caller's identity cannot be established
	CodeAPIVersion = apitypes.CodeAPIVersion // the path names an API version this daemon does not speak
	CodeNoRoute    = apitypes.CodeNoRoute    // no such endpoint
	CodeMethod     = apitypes.CodeMethod     // the endpoint exists but not with this method
	CodeTooLarge   = apitypes.CodeTooLarge   // the body exceeds the endpoint's limit
	CodeForbidden  = apitypes.CodeForbidden  // an admin endpoint called by someone else than the daemon's user
	CodeConfig     = apitypes.CodeConfig     // a reload candidate is invalid or needs a restart
	CodeNoConfig   = apitypes.CodeNoConfig   // the daemon has no config file to reload
	CodeInternal   = apitypes.CodeInternal   // the engine failed with an error it did not classify
	// CodeFlowInvalid refuses flow files that do not pass the checks (a
	// RegisterRefusal).
	CodeFlowInvalid = apitypes.CodeFlowInvalid
	// CodeTooManyConnections refuses a connection over a listener's caps
	// (see LimitListener).
	CodeTooManyConnections = apitypes.CodeTooManyConnections
)
