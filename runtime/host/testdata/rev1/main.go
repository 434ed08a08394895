// Command rev1 is a weir plugin as a build against the first SDK serves
// it: protocol revision 1 only, with one tool, rev1.echo. It checks that
// the host keeps serving revision-1 plugins.
package main

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/sdk/wire"
)

type server struct{ wire.UnimplementedPluginServer }

func (server) Manifest(_ context.Context, req *wire.ManifestRequest) (*wire.ManifestResponse, error) {
	if req.GetProtocolVersion() != 1 {
		return nil, status.Errorf(codes.FailedPrecondition, "plugin speaks protocol 1, host %d", req.GetProtocolVersion())
	}
	return &wire.ManifestResponse{ProtocolVersion: 1, SdkVersion: "0.0.1", Tools: []*wire.ToolSpec{
		{Name: "rev1.echo", Description: "Return the input unchanged.", Idempotent: true},
	}}, nil
}

func (server) Call(_ context.Context, req *wire.CallRequest) (*wire.CallResult, error) {
	return &wire.CallResult{Output: req.GetInput()}, nil
}

func (server) Cancel(context.Context, *wire.CancelRequest) (*wire.CancelResponse, error) {
	return &wire.CancelResponse{}, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  1,
			MagicCookieKey:   wire.Handshake.MagicCookieKey,
			MagicCookieValue: wire.Handshake.MagicCookieValue,
		},
		VersionedPlugins: map[int]plugin.PluginSet{
			1: {wire.PluginName: &wire.GRPCPlugin{Impl: server{}}},
		},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
