// Command http is weir's HTTP plugin.
//
// http.get and http.head are idempotent. http.post and http.put are not:
// weir calls them at most once per logical call and serializes them. The
// _keyed variants (http.post_keyed, http.put_keyed) are declared
// idempotent because they send weir's idempotency key in a header
// (Idempotency-Key unless key_header says otherwise): use them only with a
// server that dedupes on that header.
//
// Every request is bounded: a timeout (the call's deadline or the
// configured timeout, whichever is first), a body size limit, and a
// redirect limit.
package main

import (
	"encoding/json"

	"github.com/weirhq/weir/sdk"
)

// configSchema is the plugin's config section, declared in its manifest
// so that weir refuses a key this plugin does not read (allow_hosts for
// allowed_hosts, say) with its file:line instead of running without an
// allow-list.
const configSchema = `{"type":"object","additionalProperties":false,"properties":{
	"timeout_ms":{"type":"integer","minimum":1},
	"max_body_bytes":{"type":"integer","minimum":1},
	"max_redirects":{"type":"integer","minimum":0},
	"allowed_hosts":{"type":"array","items":{"type":"string"}}}}`

func main() {
	sdk.ServeWith(sdk.Options{Name: "http", ConfigSchema: configSchema,
		Tools: func(json.RawMessage) ([]sdk.Tool, error) { return tools(), nil }})
}
