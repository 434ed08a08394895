package host

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/sdk/wire"
)

// rawEcho is the host side of testdata/rawecho: a bare unary gRPC echo
// over the same go-plugin connection (unix socket, same dial options).
type rawEcho struct{ plugin.NetRPCUnsupportedPlugin }

func (rawEcho) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }

func (rawEcho) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// startRawEcho launches testdata/rawecho, with the host's mutual TLS on
// its socket or without.
func startRawEcho(b *testing.B, mtls bool) *grpc.ClientConn {
	b.Helper()
	path := testutil.Plugin(b, "rawecho")
	sum, err := FileSHA256(path)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := decodeSum(sum)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		Plugins:          plugin.PluginSet{"echo": rawEcho{}},
		Cmd:              exec.Command(path),
		SecureConfig:     &plugin.SecureConfig{Checksum: raw, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		SkipHostEnv:      true,
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(defaultMaxMessageBytes+wireOverhead),
			grpc.MaxCallSendMsgSize(defaultMaxMessageBytes+wireOverhead),
		)},
		AutoMTLS: mtls,
	})
	b.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		b.Fatal(err)
	}
	conn, err := rpc.Dispense("echo")
	if err != nil {
		b.Fatal(err)
	}
	return conn.(*grpc.ClientConn)
}

// side is one way of making the echo call, measured against the others.
type side struct {
	name string
	call func(ctx context.Context) error
	lat  []time.Duration
	wall time.Duration
}

// BenchmarkToolCall compares one testkit.echo call through the Host with a
// raw go-plugin gRPC unary echo of the same payload, and with the bare wire
// Call (the protocol without the host's checks). The sides run in
// alternating rounds in the same process so that they see the same
// machine; each reports its p50 latency and calls/s, and the host's ratios
// to raw are reported as host/raw-p50 and raw/host-calls/s. raw-mtls is
// the raw echo over the mutual TLS the host speaks to its plugins, and
// mtls/raw-p50 the per-call cost of that TLS.
func BenchmarkToolCall(b *testing.B) {
	payload := `{"data":"` + strings.Repeat("x", 100-len(`{"data":""}`)) + `"}`
	if len(payload) != 100 {
		b.Fatalf("payload is %d bytes", len(payload))
	}
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", conc), func(b *testing.B) {
			bu := setup(b, Config{PerPluginConcurrency: 16}, "testkit")
			h := bu.h
			conn, mconn := startRawEcho(b, false), startRawEcho(b, true)
			ctx := context.Background()
			rawIn := wrapperspb.Bytes([]byte(payload))
			req := CallRequest{Tool: "testkit.echo", Input: json.RawMessage(payload), IdempotencyKey: "bench"}
			if _, err := h.Call(ctx, req); err != nil { // launch
				b.Fatal(err)
			}
			inst := h.set.Load().plugins["testkit"].inst
			sides := []*side{
				{name: "raw", call: func(ctx context.Context) error {
					return conn.Invoke(ctx, "/weirbench.Echo/Echo", rawIn, new(wrapperspb.BytesValue))
				}},
				{name: "raw-mtls", call: func(ctx context.Context) error {
					return mconn.Invoke(ctx, "/weirbench.Echo/Echo", rawIn, new(wrapperspb.BytesValue))
				}},
				{name: "wire", call: func(ctx context.Context) error {
					return bareRun(ctx, inst.rpc, []byte(payload))
				}},
				{name: "host", call: func(ctx context.Context) error {
					_, err := h.Call(ctx, req)
					return err
				}},
			}
			const round = 2000
			b.ResetTimer()
			for done := 0; done < b.N; done += round {
				n := min(round, b.N-done)
				for _, s := range sides {
					measure(b, s, conc, n)
				}
			}
			b.StopTimer()
			p50 := map[string]float64{}
			rate := map[string]float64{}
			for _, s := range sides {
				slices.Sort(s.lat)
				p50[s.name] = float64(s.lat[len(s.lat)/2].Nanoseconds()) / 1e3
				rate[s.name] = float64(len(s.lat)) / s.wall.Seconds()
				b.ReportMetric(p50[s.name], s.name+"-p50-µs")
				b.ReportMetric(rate[s.name], s.name+"-calls/s")
			}
			b.ReportMetric(p50["host"]/p50["raw"], "host/raw-p50")
			b.ReportMetric(rate["raw"]/rate["host"], "raw/host-calls/s")
			b.ReportMetric(p50["raw-mtls"]/p50["raw"], "mtls/raw-p50")
		})
	}
}

// measure makes n calls of s from conc goroutines and records each call's
// latency and the round's wall time.
func measure(b *testing.B, s *side, conc, n int) {
	per := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range conc {
		k := n / conc
		if g < n%conc {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, k)
			for range k {
				t0 := time.Now()
				if err := s.call(context.Background()); err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, time.Since(t0))
			}
			per[g] = lat
		}()
	}
	wg.Wait()
	s.wall += time.Since(start)
	for _, l := range per {
		s.lat = append(s.lat, l...)
	}
}

// bareRun is one call on the wire protocol without the host: no schema,
// no deadline, no serialization, no cancel watch.
func bareRun(ctx context.Context, rpc wire.PluginClient, input []byte) error {
	r, err := rpc.Call(ctx, &wire.CallRequest{Tool: "testkit.echo", Input: input})
	if err != nil {
		return err
	}
	if r.GetError() != nil {
		return fmt.Errorf("%s", r.GetError().GetMessage())
	}
	return nil
}
