// Command rawecho serves a bare unary gRPC echo over go-plugin with weir's
// handshake and nothing else: no manifest, no schema, no idempotency key.
// It is the floor a tool call through weir's plugin host is measured
// against.
package main

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/sdk/wire"
)

var echoDesc = grpc.ServiceDesc{
	ServiceName: "weirbench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

type echoPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (echoPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&echoDesc, struct{}{})
	return nil
}

func (echoPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: wire.Handshake,
		Plugins:         plugin.PluginSet{"echo": echoPlugin{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
