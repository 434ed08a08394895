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

import "github.com/weirhq/weir/sdk"

func main() {
	sdk.Serve(tools()...)
}
