package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// run drives Main in-process with env and returns exit code, stdout, stderr.
func run(t *testing.T, env map[string]string, args ...string) (int, string, string, *Main) {
	t.Helper()
	var out, errb bytes.Buffer
	m := NewMain()
	m.Env = func(k string) string { return env[k] }
	code := m.Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String(), m
}

func TestGlobalFlagsPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                  string
		env                   map[string]string
		args                  []string
		data, plugins, socket string
	}{
		{"xdg default", map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"}, nil,
			"/x/weir", "/x/weir/plugins", "/x/weir/weir.sock"},
		{"home default", map[string]string{"HOME": "/h"}, nil,
			"/h/.local/share/weir", "/h/.local/share/weir/plugins", "/h/.local/share/weir/weir.sock"},
		{"env beats default", map[string]string{"HOME": "/h", "WEIR_DATA": "/d", "WEIR_PLUGINS": "/p", "WEIR_SOCKET": "/s"}, nil,
			"/d", "/p", "/s"},
		{"empty env is unset", map[string]string{"HOME": "/h", "WEIR_DATA": "", "WEIR_PLUGINS": ""}, nil,
			"/h/.local/share/weir", "/h/.local/share/weir/plugins", "/h/.local/share/weir/weir.sock"},
		{"flag beats env", map[string]string{"WEIR_DATA": "/d", "WEIR_PLUGINS": "/p", "WEIR_SOCKET": "/s"},
			[]string{"--data", "/fd", "--plugins", "/fp", "--socket", "/fs"}, "/fd", "/fp", "/fs"},
		{"plugins and socket follow data", map[string]string{"HOME": "/h"}, []string{"--data", "/fd"},
			"/fd", filepath.Join("/fd", "plugins"), filepath.Join("/fd", "weir.sock")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, tt.args...), "version")
			code, out, errb, m := run(t, tt.env, args...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, errb)
			}
			if !strings.HasPrefix(out, "weir ") {
				t.Errorf("version printed %q", out)
			}
			if m.DataDir != tt.data || m.PluginsDir != tt.plugins || m.SocketPath != tt.socket {
				t.Errorf("got data=%q plugins=%q socket=%q, want %q %q %q",
					m.DataDir, m.PluginsDir, m.SocketPath, tt.data, tt.plugins, tt.socket)
			}
		})
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--no-such-flag"}, {"version", "extra"}, {"no-such-command"}} {
		code, _, errb, _ := run(t, map[string]string{"HOME": "/h"}, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, errb)
		}
		if errb == "" {
			t.Errorf("%v: no message on stderr", args)
		}
	}
}

// `weir run start --request-id` refuses an id that is not UTF-8 before
// it dials the daemon (the JSON it would send carries U+FFFD instead, so
// two ids would be one), naming E_BAD_REQUEST_ID.
func TestRunStartRefusesNonUTF8RequestID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errb, _ := run(t, map[string]string{"HOME": dir}, "--socket", filepath.Join(dir, "none.sock"), "run", "start", "echo", "--request-id", "order-\xff")
	if code == 0 || out != "" || !strings.Contains(errb, "E_BAD_REQUEST_ID") || !strings.Contains(errb, "not valid UTF-8") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}
