package limits

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/sdk/wire"
)

// RawEchoPackage is the bare echo plugin a tool call is compared with: the
// same one the host's own benchmark builds.
const RawEchoPackage = "github.com/weirhq/weir/runtime/host/testdata/rawecho"

// maxMessage matches the plugin host's default message bound (4 MiB plus
// the protobuf envelope), so both sides dial with the same options.
const maxMessage = 4<<20 + 64<<10

// BuildRawEcho builds the raw echo plugin into dir and returns its path.
func BuildRawEcho(dir string) (string, error) {
	path := filepath.Join(dir, "rawecho")
	out, err := exec.Command("go", "build", "-o", path, RawEchoPackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", RawEchoPackage, err, out)
	}
	return path, nil
}

// RawEcho is a running raw echo plugin: a unary gRPC echo over the same
// go-plugin transport (Unix socket, checksum-verified launch, same dial
// options) as weir's plugin host, with nothing of weir's on top.
type RawEcho struct {
	client *plugin.Client
	conn   *grpc.ClientConn
}

type rawEchoPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (rawEchoPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }

func (rawEchoPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// StartRawEcho launches the raw echo binary at path.
func StartRawEcho(path string) (*RawEcho, error) {
	sum, err := host.FileSHA256(path)
	if err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(sum)
	if err != nil {
		return nil, err
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		Plugins:          plugin.PluginSet{"echo": rawEchoPlugin{}},
		Cmd:              exec.Command(path),
		SecureConfig:     &plugin.SecureConfig{Checksum: raw, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		SkipHostEnv:      true,
		Stderr:           io.Discard,
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessage),
			grpc.MaxCallSendMsgSize(maxMessage),
		)},
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, err
	}
	conn, err := rpc.Dispense("echo")
	if err != nil {
		client.Kill()
		return nil, err
	}
	return &RawEcho{client: client, conn: conn.(*grpc.ClientConn)}, nil
}

// Echo makes one round trip carrying payload.
func (r *RawEcho) Echo(ctx context.Context, payload *wrapperspb.BytesValue) error {
	return r.conn.Invoke(ctx, "/weirbench.Echo/Echo", payload, new(wrapperspb.BytesValue))
}

// Close stops the plugin process.
func (r *RawEcho) Close() { r.client.Kill() }

// TempDir makes a directory for measurements on the disk of base ("" for
// the system's temporary directory) and returns it with its removal.
func TempDir(base, pattern string) (string, func(), error) {
	dir, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
