package hostguard

import "testing"

func TestLoopback(t *testing.T) {
	t.Parallel()
	for hostport, want := range map[string]bool{
		"localhost": true, "LocalHost:7412": true, "127.0.0.1": true, "127.9.9.9:1": true,
		"[::1]:80": true, "::1": true, "[::1]": true,
		"evil.example": false, "localhost.evil.example": false, "127.0.0.1.evil.example": false,
		"0.0.0.0": false, "10.0.0.1:80": false, "": false, "[::ffff:127.0.0.1]:1": true,
	} {
		if got := Loopback(hostport); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", hostport, got, want)
		}
	}
}
