// Package sdk is what a tool vendor imports to ship tools to weir.
//
// A plugin is a program whose main calls Serve with one or more Tools. weir
// launches it as a separate process (hashicorp/go-plugin over gRPC), reads
// its manifest (the tools' names, descriptions, schemas, costs and
// effect classes), validates every input against the declared schema before the
// plugin sees it, and calls Run once per tool call. NewTool declares a tool
// from a typed function: the input is decoded into a Go type whose JSON
// schema it derives.
//
// Tool names are "plugin.tool"; every tool of one binary shares the plugin
// part, which becomes the plugin's name when it is installed.
//
// Effect classes: every tool declares what repeating its call does, in
// Tool.Effect. EffectRead has no side effect, and weir repeats it freely
// (a fork or a replay runs it again). EffectIdempotent receives the same
// Call.IdempotencyKey on every retry of one logical call and must dedupe on
// it (package sdk/dedupe does it durably); weir may retry it after a
// retryable error or a crash. EffectAtMostOnce is called at most once per
// logical call and never concurrently with itself. A tool that sets only
// the older Idempotent boolean is idempotent when it is true, at most once
// when not; setting both so that they disagree is refused by Serve.
//
// Reconcile probes: an at-most-once (or idempotent) tool may declare
// Tool.Reconcile, which weir asks when a call's outcome is unknown (the
// call was sent, no answer recorded: a crash). It answers
// ReconcileHappened with the call's result if it still knows it,
// ReconcileNotHappened (weir may then make the call once more), or
// ReconcileUnknown. It is bounded by weir's deadline and behind a recover;
// an error, a panic or a late answer counts as unknown. sdktest.Reconcile
// asks a probe in-process.
//
// Errors: a plain error from Run is permanent; Retryable lets weir retry
// the call, RetryAfter says when, and WithCode gives the failure a stable
// code (E_MODEL_RATE, say) that reaches the flow; an *Error says all of it
// at once. Returning ctx.Err() after cancellation reports the call as
// cancelled.
//
// Logs: Call.Logger is a *slog.Logger. Serve writes its records as slog
// JSON lines (keys time, level, msg and the attributes) to the plugin's
// stderr, and weir's plugin host is the side that adapts them: it reads
// those keys back and records each line in its own log under the plugin's
// name, at the record's level. Anything else a plugin prints is recorded
// as plain lines.
//
// The vendor API is this package, sdk/sdktest (run a tool in-process, the
// way Serve does, for unit tests) and sdk/dedupe. sdk/wire is the protocol
// between weir and Serve, importable because the host needs it, but not for
// vendors. The module github.com/weirhq/weir/sdk holds only these and what
// a plugin needs (go-plugin, gRPC, protobuf, a JSON-schema validator). See
// docs/plugins.md for how to build, test and ship a plugin.
package sdk
