// Package hook lets sdktest run a tool exactly the way sdk.Serve runs it
// without widening package sdk's exported API.
package hook

import (
	"context"

	"github.com/weirhq/weir/sdk/wire"
)

// Run runs tool (an sdk.Tool) on call (an *sdk.Call), sending progress to
// progress, and returns what Serve would send back to the host. Package sdk
// sets it in its init.
var Run func(ctx context.Context, tool, call any, progress func(done, total int64)) *wire.CallResult
