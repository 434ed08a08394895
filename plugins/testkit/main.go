// Command testkit is a weir plugin of tools that misbehave on purpose, for
// weir's own tests and benchmarks: echo, sleep (honours cancellation), hang
// (ignores it), fail (retryable failures for the first N attempts of a
// logical call), crash (exits mid-call), flood (answers N bytes),
// exclusive (records how many of its calls overlap), cost and log.
package main

import "github.com/weirhq/weir/sdk"

func main() {
	sdk.Serve(tools()...)
}
