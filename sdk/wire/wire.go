// Package wire is the protocol weir and its tool plugins share: the gRPC
// service generated from plugin.proto, go-plugin's handshake, the
// environment a plugin is launched with, the stable error kinds that cross
// the process boundary, and how tool names and JSON schemas are read.
//
// Both sides import this package (as go-plugin's examples/grpc/shared does),
// so they cannot disagree on any of it. A tool vendor imports
// github.com/weirhq/weir/sdk, never this package.
package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the version of this protocol. go-plugin carries it in
// the handshake line the plugin prints on start, and the host refuses a
// plugin announcing another version before it dials the plugin.
const ProtocolVersion = 1

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
)

// Error kinds a plugin reports in ToolError.Kind.
const (
	// KindRetryable: the call failed but the same call may succeed later.
	KindRetryable = "retryable"
	// KindPermanent: the call failed and retrying it will not help.
	KindPermanent = "permanent"
	// KindCancelled: the call's context was cancelled before it finished.
	KindCancelled = "cancelled"
)

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

// VersionedPlugins is the plugin set for ProtocolVersion, for go-plugin's
// ServeConfig and ClientConfig. server is nil on the host side.
func VersionedPlugins(server PluginServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &GRPCPlugin{Impl: server}},
	}
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
