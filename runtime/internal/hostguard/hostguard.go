// Package hostguard refuses DNS rebinding: a web page on evil.example
// whose name its DNS server re-points at 127.0.0.1 is, to the browser, the
// same origin as the attacker's own site, and its scripts can then talk to
// a server on the loopback interface freely. Such a request arrives on a
// loopback listener with "Host: evil.example"; a loopback server answers
// only requests that name it by a loopback name. The console and the MCP
// HTTP server both wrap their handlers with Check.
package hostguard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Code is the refusal's stable code.
const Code = "E_HOST"

// Loopback reports whether hostport ("localhost", "127.0.0.1:7412",
// "[::1]:80") names the loopback interface.
func Loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]") // no port
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Check refuses r if it arrived on a loopback listener but its Host
// header names something else. A proxy on the same machine must pass a
// loopback Host (nginx's proxy_pass does by default). A request on any
// other listener passes: its Host is whatever the network path gave it.
func Check(r *http.Request) error {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !Loopback(local.String()) || Loopback(r.Host) {
		return nil
	}
	return fmt.Errorf("the Host header %q does not name this loopback server (a DNS rebinding attack looks like this); use http://127.0.0.1 or http://localhost", cut(r.Host))
}

func cut(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
