package host

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/sdk/wire"
)

// envDialSocket makes the test binary a stranger to a plugin: instead of
// the tests it dials the plugin socket the variable names (see TestMain).
const envDialSocket = "WEIR_TEST_DIAL_PLUGIN_SOCKET"

// dialPluginSocket connects to a plugin's socket and asks for its
// manifest as a process that is not the host would: in plain gRPC, then
// over TLS with a certificate of its own. It prints one line per try.
func dialPluginSocket(sock string, out io.Writer) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintf(out, "connect: %v\n", err)
		return
	}
	c.Close()
	fmt.Fprintln(out, "connect: ok")
	try := func(name string, creds credentials.TransportCredentials) {
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(creds))
		if err != nil {
			fmt.Fprintf(out, "%s: %v\n", name, err)
			return
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		m, err := wire.NewPluginClient(conn).Manifest(ctx, &wire.ManifestRequest{ProtocolVersion: wire.ProtocolVersion})
		if err != nil {
			fmt.Fprintf(out, "%s: refused: %v\n", name, err)
			return
		}
		fmt.Fprintf(out, "%s: ok, %d tools\n", name, len(m.GetTools()))
	}
	try("plain", insecure.NewCredentials())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	own := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	// Presented whatever CAs the plugin asks for.
	try("tls", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &own, nil }}))
}

// TestPluginSocketRefusesAnotherUser: a second OS user who can reach a
// running plugin's socket (its mode opened to everyone, as a permissive
// umask would leave it) connects, and gets nothing from it, neither in
// plain gRPC nor with a TLS certificate of its own: the host's plugins
// speak mutual TLS with a key pair made for each launch. The same
// stranger against a plugin launched without mutual TLS gets its
// manifest: the check can see the hole it closes.
func TestPluginSocketRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another OS user (uid 65534)")
	}
	if _, err := user.LookupId("65534"); err != nil {
		t.Skipf("no user with uid 65534 to play the second user: %v", err)
	}
	// The stranger runs this test binary, copied where uid 65534 may
	// execute it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := os.MkdirTemp("", "wmtls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	stranger := filepath.Join(binDir, "stranger")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stranger, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	asStranger := func(sock string) string {
		t.Helper()
		// What a permissive umask would have made of the socket.
		if err := os.Chmod(sock, 0o777); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(stranger)
		cmd.Env = []string{envDialSocket + "=" + sock}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("the stranger: %v\n%s", err, out.String())
		}
		return out.String()
	}
	socketOf := func(c *plugin.Client) string {
		t.Helper()
		addr := c.ReattachConfig().Addr
		if addr.Network() != "unix" {
			t.Fatalf("the plugin listens on %s %s, not a unix socket", addr.Network(), addr)
		}
		return addr.String()
	}

	bu := setup(t, Config{}, "testkit")
	if _, err := bu.h.Call(context.Background(), CallRequest{Tool: "testkit.echo", Input: []byte(`{}`), IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	out := asStranger(socketOf(bu.h.set.Load().plugins["testkit"].inst.client))
	t.Logf("the stranger on the host's plugin:\n%s", out)
	if !strings.Contains(out, "connect: ok") || !strings.Contains(out, "plain: refused") || !strings.Contains(out, "tls: refused") {
		t.Errorf("a second user on the host's plugin socket:\n%s", out)
	}
	// The host still calls its plugin.
	if _, err := bu.h.Call(context.Background(), CallRequest{Tool: "testkit.echo", Input: []byte(`{}`), IdempotencyKey: "k2"}); err != nil {
		t.Errorf("the host's call after the stranger's tries: %v", err)
	}

	// The control: the same plugin launched without mutual TLS.
	path := testutil.Plugin(t, "testkit")
	sum, err := FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := decodeSum(sum)
	plain := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.VersionedPlugins(nil),
		Cmd:              exec.Command(path),
		SecureConfig:     &plugin.SecureConfig{Checksum: raw, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		SkipHostEnv:      true,
	})
	t.Cleanup(plain.Kill)
	if _, err := plain.Client(); err != nil {
		t.Fatal(err)
	}
	if out := asStranger(socketOf(plain)); !strings.Contains(out, "plain: ok") {
		t.Errorf("the control: a second user on a plugin socket without mutual TLS did not get its manifest:\n%s", out)
	}
}
