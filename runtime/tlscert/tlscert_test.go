package tlscert

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// serve runs an HTTP server on a TLS listener presenting c.
func serve(t *testing.T, c *Cert) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(c.Listener(ln)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String()
}

// presented dials addr trusting caFile and returns the serial of the
// certificate the server presented.
func presented(t *testing.T, addr, caFile string) string {
	t.Helper()
	cfg, err := ClientConfig(caFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestReloadSwapsTheCertificate: a new pair installed while the listener
// runs is presented on the next handshake, verified against its own CA.
func TestReloadSwapsTheCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := testutil.NewCert(t, dir, "first"), testutil.NewCert(t, dir, "second")
	c, err := Load(first.CertFile, first.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, c)
	if got := presented(t, addr, first.CAFile); got != first.Leaf.SerialNumber.String() {
		t.Fatalf("serial %s, want the first certificate's", got)
	}
	pair, err := Read(second.CertFile, second.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c.Set(pair)
	if got := presented(t, addr, second.CAFile); got != second.Leaf.SerialNumber.String() {
		t.Fatalf("serial %s after the swap, want the second certificate's", got)
	}
	// A client trusting only the first CA refuses the new certificate.
	cfg, _ := ClientConfig(first.CAFile)
	if conn, err := tls.Dial("tcp", addr, cfg); err == nil {
		conn.Close()
		t.Fatal("a client of the first CA accepted the second certificate")
	}
}

// TestPlainHTTPRefused: a plain request on the TLS listener gets a 400
// that says why, and no content.
func TestPlainHTTPRefused(t *testing.T) {
	t.Parallel()
	cert := testutil.NewCert(t, t.TempDir(), "plain")
	c, err := Load(cert.CertFile, cert.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, c)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTP request to an HTTPS server") || strings.Contains(string(body), "hello") {
		t.Fatalf("plain HTTP: %d %q", resp.StatusCode, body)
	}
	// The raw exchange: the server closes after its answer.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.0 400") {
		t.Fatalf("raw answer %q", line)
	}
}

// TestReadRefusesBadPairs: a key of another certificate and a missing
// file are refused with the files named.
func TestReadRefusesBadPairs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := testutil.NewCert(t, dir, "a"), testutil.NewCert(t, dir, "b")
	if _, err := Read(a.CertFile, b.KeyFile); err == nil || !strings.Contains(err.Error(), a.CertFile) {
		t.Errorf("mismatched key: %v", err)
	}
	if _, err := Read(dir+"/none.pem", a.KeyFile); err == nil || !strings.Contains(err.Error(), "none.pem") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ClientConfig(a.KeyFile); err == nil {
		t.Errorf("a key file taken as a CA bundle")
	}
}
