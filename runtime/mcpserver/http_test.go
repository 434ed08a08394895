package mcpserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The HTTP transport on a loopback listener refuses a request whose Host
// is not a loopback name (DNS rebinding) with 403 E_HOST, before its token
// is looked at: the console's check, hostguard. A loopback Host gets on to
// the token check.
func TestHTTPRefusesForeignHost(t *testing.T) {
	t.Parallel()
	dialed := false
	srv := httptest.NewServer(Handler(func(string) Daemon { dialed = true; return nil }, Options{}))
	t.Cleanup(srv.Close)
	for host, want := range map[string]int{
		"evil.example":                         http.StatusForbidden,
		"evil.example:80":                      http.StatusForbidden,
		strings.TrimPrefix(srv.URL, "http://"): http.StatusUnauthorized,
		"localhost":                            http.StatusUnauthorized,
	} {
		req, err := http.NewRequest("POST", srv.URL, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer some-token-0123456789")
		if want == http.StatusUnauthorized {
			req.Header.Del("Authorization")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == http.StatusForbidden && !strings.HasPrefix(string(body), "E_HOST: ") {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, body, want)
		}
	}
	if dialed {
		t.Error("a refused request reached the daemon")
	}
}
