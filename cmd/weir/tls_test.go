package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

// TestTCPListenerTLS: a daemon whose tcp block has a tls block, with a
// certificate made here. The CLI reaches it with --address https://...
// and --tls-ca (or WEIR_TLS_CA); without the CA it refuses the daemon's
// certificate; plain HTTP on the listener gets a 400 saying so. A renewed
// certificate written over the same files is presented after SIGHUP,
// and a broken one is refused by the reload, the old one kept.
func TestTCPListenerTLS(t *testing.T) {
	e2e(t, "starts a real daemon")
	dir := t.TempDir()
	first, renewed := testutil.NewCert(t, t.TempDir(), "first"), testutil.NewCert(t, t.TempDir(), "renewed")
	certFile, keyFile := filepath.Join(dir, "weir.pem"), filepath.Join(dir, "weir-key.pem")
	install := func(c testutil.Cert) {
		t.Helper()
		for src, dst := range map[string]string{c.CertFile: certFile, c.KeyFile: keyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := filepath.Join(dir, "weir.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`tcp {
  address = %q
  token "alice" {
    secret = "alice-token-0123456789"
  }
  tls {
    cert_file = "weir.pem"
    key_file  = "weir-key.pem"
  }
}
`, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t)
	d.serveArgs = []string{"--config", cfg}
	d.start("")

	env := func(kv ...string) map[string]string {
		m := map[string]string{"WEIR_DATA": d.data, "WEIR_SOCKET": filepath.Join(dir, "no-socket"), "WEIR_TOKEN": "alice-token-0123456789"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	https := "https://" + addr
	if code, out, errb, _ := run(t, env(), "--address", https, "--tls-ca", first.CAFile, "status"); code != 0 || !strings.Contains(out, "you are:         alice (bearer token)") {
		t.Fatalf("status over TLS: %d %s %s", code, out, errb)
	}
	if code, out, errb, _ := run(t, env("WEIR_ADDRESS", https, "WEIR_TLS_CA", first.CAFile), "status"); code != 0 || !strings.Contains(out, "alice") {
		t.Fatalf("status over TLS from the environment: %d %s %s", code, out, errb)
	}
	if code, _, errb, _ := run(t, env(), "--address", https, "status"); code != exitFailed || !strings.Contains(errb, "presented a certificate this client does not trust (x509: certificate signed by unknown authority): pass --tls-ca") {
		t.Errorf("status without the CA: %d %s, want the certificate refused", code, errb)
	}
	if code, _, errb, _ := run(t, env(), "--address", "http://"+addr, "status"); code != exitFailed || !strings.Contains(errb, "400 Bad Request: Client sent an HTTP request to an HTTPS server") {
		t.Errorf("status in plain HTTP: %d %s", code, errb)
	}
	if code, _, errb, _ := run(t, env(), "--address", "http://"+addr, "--tls-ca", first.CAFile, "status"); code != exitUsage || !strings.Contains(errb, "plain http://") {
		t.Errorf("--tls-ca with http://: %d %s", code, errb)
	}
	resp, err := http.Get("http://" + addr + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "admission") {
		t.Errorf("plain GET /v1/health: %d %q", resp.StatusCode, body)
	}

	// Renewal: new files under the same names, then SIGHUP.
	install(renewed)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, _, errb, _ := run(t, env(), "--address", https, "--tls-ca", renewed.CAFile, "status"); code != 0 {
			return fmt.Errorf("the renewed certificate is not presented: %s", errb)
		}
		return nil
	})
	if code, _, errb, _ := run(t, env(), "--address", https, "--tls-ca", first.CAFile, "status"); code != exitFailed || !strings.Contains(errb, "certificate") {
		t.Errorf("the first CA still verifies after the renewal: %d %s", code, errb)
	}
	if !strings.Contains(d.log(), `tcp certificate loaded: subject=renewed`) {
		t.Errorf("the reload does not log the certificate it loaded:\n%s", d.log())
	}

	// A broken key: the reload is refused, the renewed certificate stays.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errb := d.cli("admin", "reload")
	if code != exitFailed || !strings.Contains(errb, "tcp tls") || !strings.Contains(errb, "unchanged") {
		t.Errorf("reload with a broken key: %d %s %s", code, out, errb)
	}
	if code, _, errb, _ := run(t, env(), "--address", https, "--tls-ca", renewed.CAFile, "status"); code != 0 {
		t.Errorf("after the refused reload: %s", errb)
	}
	d.stop()
}
