package host

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestParseSlogLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		line  string
		ok    bool
		level hclog.Level
		msg   string
		attrs string // fmt of the attributes
	}{
		{"info with attributes in order", `{"time":"2026-12-01T00:00:00.5Z","level":"INFO","msg":"hi","tool":"a.b","n":3,"z":true}`,
			true, hclog.Info, "hi", "[timestamp 2026-12-01T00:00:00.500Z tool a.b n 3 z true]"},
		{"debug", `{"level":"DEBUG","msg":"d"}`, true, hclog.Debug, "d", "[]"},
		{"below debug is trace", `{"level":"DEBUG-4","msg":"t"}`, true, hclog.Trace, "t", "[]"},
		{"warn", `{"level":"WARN","msg":"w"}`, true, hclog.Warn, "w", "[]"},
		{"between levels takes the lower", `{"level":"INFO+2","msg":"i"}`, true, hclog.Info, "i", "[]"},
		{"error and above", `{"level":"ERROR+8","msg":"e"}`, true, hclog.Error, "e", "[]"},
		{"groups stay objects", `{"level":"INFO","msg":"g","req":{"id":1}}`, true, hclog.Info, "g", "[req map[id:1]]"},
		{"unparsable time kept as is", `{"time":"yesterday","level":"INFO","msg":"x"}`, true, hclog.Info, "x", "[time yesterday]"},
		{"plain text", `hello`, false, 0, "", ""},
		{"hclog line", `{"@level":"info","@message":"m"}`, false, 0, "", ""},
		{"no msg", `{"level":"INFO"}`, false, 0, "", ""},
		{"level not a level", `{"level":"LOUD","msg":"m"}`, false, 0, "", ""},
		{"level not a string", `{"level":4,"msg":"m"}`, false, 0, "", ""},
		{"truncated", `{"level":"INFO","msg":"m"`, false, 0, "", ""},
		{"trailing data", `{"level":"INFO","msg":"m"} {}`, false, 0, "", ""},
		{"not an object", `["level","INFO"]`, false, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			level, msg, attrs, ok := parseSlogLine([]byte(tt.line))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if got := fmt.Sprint(attrs); level != tt.level || msg != tt.msg || got != tt.attrs {
				t.Fatalf("got %v %q %s, want %v %q %s", level, msg, got, tt.level, tt.msg, tt.attrs)
			}
		})
	}
}

// TestPluginLoggerReadsSlogLines: a line the SDK's logger writes, handed to
// Debug the way go-plugin hands it over, is logged at its own level through
// a named logger; other Debug lines and go-plugin's graceful-exit warning
// are logged as before.
func TestPluginLoggerReadsSlogLines(t *testing.T) {
	t.Parallel()
	var line bytes.Buffer
	slog.New(slog.NewJSONHandler(&line, nil)).Warn("disk almost full", "tool", "fs.write", "free", 12)

	var out bytes.Buffer
	l := hclog.Logger(newPluginLogger(hclog.New(&hclog.LoggerOptions{Name: "weir", Output: &out, Level: hclog.Info})))
	named := l.Named("plugin").Named("fs")
	named.Debug(strings.TrimSpace(line.String()))
	named.Debug("not a record")
	l.Warn("plugin failed to exit gracefully")
	got := out.String()
	if !strings.Contains(got, "[WARN]  weir.plugin.fs: disk almost full: timestamp=") || !strings.Contains(got, "tool=fs.write free=12") {
		t.Fatalf("the slog line was not logged as a warning with its attributes:\n%s", got)
	}
	if strings.Contains(got, "not a record") || strings.Contains(got, "exit gracefully") {
		t.Fatalf("a debug line or the graceful-exit warning passed an info logger:\n%s", got)
	}
	if strings.Count(got, "\n") != 1 {
		t.Fatalf("want exactly one line:\n%s", got)
	}
}
