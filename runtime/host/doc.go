// Package host is weir's plugin host: it launches tool plugins as separate
// processes (hashicorp/go-plugin over gRPC, the protocol of package
// sdk/wire), verifies each binary against the SHA-256 pinned at install,
// caches each plugin's manifest by that checksum, and makes tool calls with
// the guarantees of docs/design.md §3:
//
//   - every input is validated against the tool's declared schema before
//     the plugin sees it;
//   - every call has a deadline; cancellation and the deadline reach the
//     plugin's context, and a plugin that does not acknowledge them within
//     a grace period is considered hung and killed;
//   - answers larger than Config.MaxMessageBytes are refused without being
//     read, and the host goes on;
//   - a plugin that crashes fails its in-flight calls with a retryable
//     KindCrashed error and is restarted, with backoff, on next use; other
//     plugins are untouched;
//   - a plugin with calls in flight is pinged (gRPC's health check, every
//     Config.PingInterval); one that does not answer within
//     Config.PingTimeout is hung, and is treated as crashed;
//   - a plugin runs in its own process group, killed whole when its launch
//     fails or it is killed, so nothing it started holds its pipes open;
//   - a call without a deadline gets its tool's declared default timeout
//     (protocol revision 2), else Config.DefaultTimeout;
//   - calls to a non-idempotent tool are serialized (one in flight per tool
//     across all callers); idempotent tools run concurrently up to
//     Config.PerPluginConcurrency calls per plugin;
//   - those slots are shared between the calls' owners (owner.From of the
//     call's ctx): a waiting call is queued in its owner's line and a slot
//     that frees goes to the owner holding fewest, so one owner's slow
//     calls cannot hold a plugin while another owner's wait.
//
// On disk, a plugins directory holds the binaries (PLUGINS/NAME), the pins
// (PLUGINS/pins.json, written by Install) and the manifest cache
// (PLUGINS/.manifests/SHA256[-CONFIGHASH].json). Each plugin gets a private
// state directory DATA/plugin-state/NAME. LoadCatalog resolves tools from
// the cache without launching anything, which is what the CLI's checks
// need; New launches the plugins given a config section at once, so that
// the daemon registers flows against the tools they declare now. A
// revision-2 plugin whose tool list changes while it runs sends its new
// manifest on the WatchManifest stream, and the host swaps that plugin's
// tools in the set in service (see watch.go) without relaunching it.
// ReadHealth reads what a plugin says of the servers it cannot reach
// (sdk/wire's HealthFile in its state directory).
//
// The kinds of failure (Kind) are sdk/wire's, and a tool's error keeps the
// stable code and retry-after the tool gave it (ToolError.Code,
// RetryAfter). A plugin's log records arrive as slog JSON lines on its
// stderr (the SDK's Call.Logger); the host reads them back into
// Config.Logger under plugin.NAME, at their level (see pluginLogger).
package host
