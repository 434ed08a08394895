// Package apitypes holds the requests and answers of weir's HTTP API
// (/v1/) as they travel on the wire, apart from the store's records and the
// engine's internal types: the server (runtime/api) converts its records
// into these types, and the client (runtime/api/client) decodes them, so a
// change to a store record cannot change the API by accident and an
// application that talks to a daemon needs neither the engine nor the
// store.
//
// The package depends on the standard library only.
package apitypes
