// Package docs holds weir's documentation. Its one Go file embeds the
// documents the daemon serves itself: the OpenAPI description of the HTTP
// API, which runtime/api answers at GET /v1/openapi.json and checks
// against its route table and wire types in a test, so the file a reader
// opens here is the one the daemon serves.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml: the HTTP API, in OpenAPI 3.1.
//
//go:embed openapi.yaml
var OpenAPI []byte
