// Package sdk is all a tool vendor imports to ship tools to weir.
//
// A plugin is a program whose main calls Serve with one or more Tools. weir
// launches it as a separate process (hashicorp/go-plugin over gRPC), reads
// its manifest (the tools' names, descriptions, schemas, costs and
// idempotency), validates every input against the declared schema before the
// plugin sees it, and calls Run once per tool call.
//
// Tool names are "plugin.tool"; every tool of one binary shares the plugin
// part, which becomes the plugin's name when it is installed.
//
// Idempotency: a tool that declares Idempotent receives the same
// Call.IdempotencyKey on every retry of one logical call and must dedupe on
// it; weir may retry it after a retryable error or a crash. A tool that does
// not declare it is called at most once per logical call and never
// concurrently with itself.
//
// Errors: a plain error from Run is permanent; wrap it with Retryable to let
// weir retry the call. Returning ctx.Err() after cancellation reports the
// call as cancelled.
//
// Package sdktest runs a tool in-process, the way Serve does, for unit tests.
// See docs/plugins.md for how to build, test and ship a plugin.
package sdk
