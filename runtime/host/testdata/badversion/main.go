// Command badversion is a weir plugin from the future: it speaks protocol
// version 99 only, and weir must refuse it before reading anything else.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/weirhq/weir/sdk/wire"
)

type server struct{ wire.UnimplementedPluginServer }

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			MagicCookieKey:   wire.Handshake.MagicCookieKey,
			MagicCookieValue: wire.Handshake.MagicCookieValue,
		},
		VersionedPlugins: map[int]plugin.PluginSet{
			99: {wire.PluginName: &wire.GRPCPlugin{Impl: &server{}}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
