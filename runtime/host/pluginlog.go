package host

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/internal/escape"
)

// pluginLogger is the hclog logger go-plugin is given for a plugin. The
// SDK writes a tool's log records to the plugin's stderr as slog JSON lines
// (keys time, level, msg, then the attributes); go-plugin reads that stderr
// line by line but understands only hclog's JSON keys, and hands any other
// line to Debug as it is. This is the side that adapts: it reads such a
// line back as a record at its own level, with its attributes. Everything
// else passes through, apart from go-plugin's warning about a plugin that
// did not exit gracefully (see Warn).
type pluginLogger struct {
	hclog.Logger
	cut *lineCut
}

// MaxPluginLogLine bounds one line of a plugin's output in the daemon
// log. go-plugin hands a longer line of the plugin's stderr over in pieces
// of this size; the first is logged (marked as cut) and the rest only
// counted, and the same holds for what the plugin prints on its stdout
// and stderr streams (lineLogger). Every logged line has its control
// characters escaped (package escape): a plugin's output is not trusted
// to be text.
const MaxPluginLogLine = 4 << 10

// lineCut follows a line that is being cut: go-plugin's pieces of it
// after the first are counted, not logged.
type lineCut struct {
	mu       sync.Mutex
	dropping bool
	dropped  int
}

func newPluginLogger(l hclog.Logger) pluginLogger { return pluginLogger{l, &lineCut{}} }

// Debug logs a line of the plugin's stderr, or a slog JSON line of the
// plugin as the record it encodes.
func (l pluginLogger) Debug(msg string, args ...any) {
	if len(args) == 0 {
		if l.cut != nil {
			l.cut.mu.Lock()
			switch {
			case l.cut.dropping:
				l.cut.dropped += len(msg)
				if len(msg) < MaxPluginLogLine { // the line's last piece
					n := l.cut.dropped
					l.cut.dropping, l.cut.dropped = false, 0
					l.cut.mu.Unlock()
					l.Logger.Debug("the plugin's last log line was cut", "dropped_bytes", n, "max_line_bytes", MaxPluginLogLine)
					return
				}
				l.cut.mu.Unlock()
				return
			case len(msg) >= MaxPluginLogLine: // the first piece of a long line
				l.cut.dropping = true
				l.cut.mu.Unlock()
				l.Logger.Debug(escape.String(msg[:MaxPluginLogLine])+" ...", "cut_at_bytes", MaxPluginLogLine)
				return
			}
			l.cut.mu.Unlock()
		}
		if level, m, attrs, ok := parseSlogLine([]byte(msg)); ok {
			l.Logger.Log(level, escape.String(m), escapeAttrs(attrs)...)
			return
		}
		msg = escape.String(msg)
	}
	l.Logger.Debug(msg, args...)
}

// escapeAttrs escapes the string keys and values of a plugin's record.
func escapeAttrs(attrs []any) []any {
	for i, a := range attrs {
		if s, ok := a.(string); ok {
			attrs[i] = escape.String(s)
		}
	}
	return attrs
}

// Warn demotes go-plugin's warning that a plugin "failed to exit
// gracefully": the host says so itself when it kills a plugin on purpose
// (hung, crashed, failed launch), and the warning would only repeat it.
func (l pluginLogger) Warn(msg string, args ...any) {
	if msg == "plugin failed to exit gracefully" {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Warn(msg, args...)
}

// Named, ResetNamed and With keep the adapter: go-plugin reads a plugin's
// stderr through a logger named after the plugin's binary.
func (l pluginLogger) Named(name string) hclog.Logger {
	return pluginLogger{l.Logger.Named(name), l.cut}
}

func (l pluginLogger) ResetNamed(name string) hclog.Logger {
	return pluginLogger{l.Logger.ResetNamed(name), l.cut}
}

func (l pluginLogger) With(args ...any) hclog.Logger {
	return pluginLogger{l.Logger.With(args...), l.cut}
}

// parseSlogLine reads one line written by slog.JSONHandler: an object whose
// "level" (DEBUG, INFO, WARN, ERROR, possibly with an offset such as
// INFO+2) and "msg" are strings. Its "time" is kept as the attribute
// "timestamp", as go-plugin does for hclog lines, and the other keys become
// attributes in the order they were written. Any other line is not one.
func parseSlogLine(line []byte) (level hclog.Level, msg string, attrs []any, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return 0, "", nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, "", nil, false
	}
	var haveLevel, haveMsg bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, "", nil, false
		}
		key, _ := t.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return 0, "", nil, false
		}
		switch s, isString := v.(string); {
		case key == slog.LevelKey && isString && !haveLevel:
			var sl slog.Level
			if sl.UnmarshalText([]byte(s)) != nil {
				return 0, "", nil, false
			}
			level, haveLevel = hclogLevel(sl), true
		case key == slog.MessageKey && isString && !haveMsg:
			msg, haveMsg = s, true
		case key == slog.TimeKey && isString:
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				attrs = append(attrs, "timestamp", t.Format(hclog.TimeFormat))
			} else {
				attrs = append(attrs, key, v)
			}
		default:
			attrs = append(attrs, key, v)
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || dec.More() {
		return 0, "", nil, false
	}
	return level, msg, attrs, haveLevel && haveMsg
}

// hclogLevel maps a slog level onto hclog's: below DEBUG is TRACE, and a
// level between two of slog's named ones takes the lower.
func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}
