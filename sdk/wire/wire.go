// Package wire is the protocol between weir and its tool plugins, not an
// API for tool vendors: the gRPC service generated from plugin.proto,
// go-plugin's handshake, the environment a plugin is launched with, the
// stable error kinds and codes, and how tool names and JSON schemas are read.
//
// Both sides import this package (as go-plugin's examples/grpc/shared does),
// so they cannot disagree on any of it; it is importable only because the
// host lives in another module and Go forbids importing sdk/internal from
// there. It changes whenever the protocol does, without the compatibility
// promise of the vendor packages. A tool vendor imports
// github.com/weirhq/weir/sdk, sdk/sdktest and sdk/dedupe, never this
// package.
package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the newest revision of this protocol, the one this
// package's code speaks. go-plugin carries the revision in the handshake
// line the plugin prints on start, and the host refuses a plugin
// announcing one it does not serve before it dials the plugin.
//
// Revision 2 adds, to revision 1, only new fields and RPCs (see
// plugin.proto): a tool's default timeout (ToolSpec.default_timeout), the
// error kinds KindUnknown and KindNotSent, the WatchManifest stream of
// manifest changes, and the effect class with the Reconcile RPC of a
// tool's probe, in use; and, reserved for later work and not used yet,
// trace context on every call and the Partials stream. (plugin.proto's
// comments still call WatchManifest, the effect class and Reconcile
// reserved: they change with the next regeneration.) Both sides speak every revision from MinProtocolVersion on, and
// go-plugin picks the highest they share: a revision-1 plugin keeps
// working, and so does a revision-2 plugin under a revision-1 host.
const ProtocolVersion = 2

// MinProtocolVersion is the oldest revision both sides still speak.
const MinProtocolVersion = 1

// PluginName is the name the tool service is dispensed under in go-plugin's
// plugin set.
const PluginName = "tools"

// Handshake is go-plugin's handshake for weir plugins. The magic cookie is not
// a security measure: it only tells a user who runs a plugin binary by hand
// that it is meant to be launched by weir.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "WEIR_PLUGIN_COOKIE",
	MagicCookieValue: "d3a1f0c4-weir-tool-plugin",
}

// Environment variables the host sets when it launches a plugin.
const (
	// EnvStateDir names the plugin's private state directory,
	// DATA/plugin-state/NAME. It exists when the plugin starts.
	EnvStateDir = "WEIR_PLUGIN_STATE"
	// EnvConfig holds the plugin's section of the daemon's configuration,
	// as JSON ("" when there is none).
	EnvConfig = "WEIR_PLUGIN_CONFIG"
	// EnvName holds the plugin's name, the part of its tool names before
	// the dot.
	EnvName = "WEIR_PLUGIN_NAME"
	// EnvLogLevel is the level of the plugin's log records that weir
	// keeps: trace, debug, info (the default), warn or error. The host
	// passes its own environment's value through.
	EnvLogLevel = "WEIR_PLUGIN_LOG_LEVEL"
)

// Error kinds: the one definition of the stable names of a tool call's
// failure, which cross into run events, the CLI and the plugin protocol. A
// plugin reports the first three in ToolError.Kind, and from revision 2
// KindUnknown and KindNotSent; the host adds the others for failures it
// finds itself (runtime/host.Kind is made of these,
// and sdktest reports them as the host would).
const (
	// KindRetryable: the call failed but the same call may succeed later.
	KindRetryable = "retryable"
	// KindPermanent: the call failed and retrying it will not help.
	KindPermanent = "permanent"
	// KindCancelled: the call's context was cancelled before it finished.
	KindCancelled = "cancelled"

	// KindSchema: the input does not match the tool's input schema (or is
	// not JSON); the plugin never saw the call.
	KindSchema = "schema"
	// KindUnknownTool: no installed plugin provides the tool.
	KindUnknownTool = "unknown_tool"
	// KindCrashed: the plugin process died or could not be started; the
	// outcome of the call is unknown.
	KindCrashed = "crashed"
	// KindDeadline: the call's deadline passed before it finished.
	KindDeadline = "deadline"
	// KindTooLarge: the input or the answer exceeds the message limit.
	KindTooLarge = "too_large"
	// KindProtocol: the plugin speaks another protocol version or broke
	// the protocol (bad manifest, output that is not JSON, ...).
	KindProtocol = "protocol"
	// KindChecksum: the plugin binary is missing, not pinned, or no longer
	// matches its pinned SHA-256; it is not launched.
	KindChecksum = "checksum"

	// KindUnknown (revision 2): the tool sent the call on and got no
	// answer (the connection to what performs it was lost), so it cannot
	// tell whether the call's effect happened. weir retries an idempotent
	// tool with the same key; an at-most-once tool's call ends as an
	// unknown outcome (E_OUTCOME_UNKNOWN).
	KindUnknown = "unknown"
	// KindNotSent (revision 2): the call never reached what performs it,
	// so it may be made again whatever the tool's effect class; weir
	// retries it within the node's retries.
	KindNotSent = "not_sent"
)

// MaxToolTimeout bounds a tool's declared default timeout
// (ToolSpec.default_timeout): a longer call is the caller's to allow, with
// its own timeout.
const MaxToolTimeout = time.Hour

// MaxErrorCodeBytes bounds ToolError.Code: a code is a name, not a message.
const MaxErrorCodeBytes = 64

// MaxRetryAfter bounds ToolError.RetryAfter. A tool that learns of a longer
// wait (a provider's Retry-After of hours) reports this much: the caller
// retries then and learns again, rather than parking a call for a day on
// one answer.
const MaxRetryAfter = time.Hour

// CheckErrorCode reports whether code can be a ToolError.Code: empty, or
// upper-case ASCII letters, digits and '_', starting with a letter, at most
// MaxErrorCodeBytes long (E_MODEL_RATE, say).
func CheckErrorCode(code string) error {
	if code == "" {
		return nil
	}
	if len(code) > MaxErrorCodeBytes {
		return fmt.Errorf("error code %.16q... is longer than %d bytes", code, MaxErrorCodeBytes)
	}
	for i, r := range code {
		switch {
		case r >= 'A' && r <= 'Z':
		case (r >= '0' && r <= '9' || r == '_') && i > 0:
		default:
			return fmt.Errorf("error code %q must start with an upper-case letter and hold only upper-case letters, digits and '_'", code)
		}
	}
	return nil
}

// Cancel reasons the host sends in CancelRequest.Reason.
const (
	ReasonCancelled = "cancelled"
	ReasonDeadline  = "deadline"
)

// GRPCPlugin binds the Plugin service to go-plugin. On the plugin side Impl is
// the implementation; on the host side GRPCClient returns a PluginClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's implementation (plugin side only).
	Impl PluginServer
}

// GRPCServer registers the Plugin service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("wire: GRPCPlugin has no Impl")
	}
	RegisterPluginServer(s, p.Impl)
	return nil
}

// GRPCClient returns a PluginClient on the connection go-plugin dialed.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewPluginClient(c), nil
}

// VersionedPlugins is the plugin set of every revision from
// MinProtocolVersion to ProtocolVersion, for go-plugin's ServeConfig and
// ClientConfig: one service serves them all, since later revisions only
// add to it. server is nil on the host side.
func VersionedPlugins(server PluginServer) map[int]plugin.PluginSet {
	out := map[int]plugin.PluginSet{}
	for v := MinProtocolVersion; v <= ProtocolVersion; v++ {
		out[v] = plugin.PluginSet{PluginName: &GRPCPlugin{Impl: server}}
	}
	return out
}

// SpeaksVersion reports whether v is a revision this package serves.
func SpeaksVersion(v uint32) bool {
	return v >= MinProtocolVersion && v <= ProtocolVersion
}

// SplitToolName splits "plugin.tool" into its plugin and tool parts. Both
// must be non-empty and made of lower-case letters, digits, '_' and '-'
// (the plugin part starting with a letter), so that a plugin name is always
// a safe file name.
func SplitToolName(name string) (pluginName, tool string, err error) {
	p, t, ok := strings.Cut(name, ".")
	if !ok {
		return "", "", fmt.Errorf("tool name %q is not of the form plugin.tool", name)
	}
	if err := CheckPluginName(p); err != nil {
		return "", "", fmt.Errorf("tool name %q: %w", name, err)
	}
	if !validWord(t) {
		return "", "", fmt.Errorf("tool name %q: %q after the dot must be lower-case letters, digits, '_' or '-'", name, t)
	}
	return p, t, nil
}

// CheckPluginName reports whether name can be a plugin name.
func CheckPluginName(name string) error {
	if !validWord(name) || name[0] < 'a' || name[0] > 'z' {
		return fmt.Errorf("plugin name %q must start with a lower-case letter and hold only lower-case letters, digits, '_' or '-'", name)
	}
	return nil
}

func validWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
