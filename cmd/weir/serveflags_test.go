package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/config"
)

// notKnobFlags are weir serve's flags that are no knob's, each with why.
var notKnobFlags = map[string]string{
	"config": "names the file the knobs are read from",
	"help":   "cobra's",
}

// Every flag of weir serve is a knob's or says why not, and every knob
// with a flag has it, its default the knob's: a setting cannot be added
// to the command line past the table, or to the table without its flag.
func TestServeFlagsAreKnobs(t *testing.T) {
	t.Parallel()
	serve, _, err := NewMain().rootCommand().Find([]string{"serve"})
	if err != nil || serve.Name() != "serve" {
		t.Fatalf("finding serve: %v", err)
	}
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if notKnobFlags[f.Name] == "" && config.KnobByFlag(f.Name) == nil {
			t.Errorf("serve's --%s is no knob's flag (config.Knobs) and not in notKnobFlags with a reason", f.Name)
		}
	})
	n := 0
	for _, k := range config.Knobs {
		if k.Flag == "" {
			continue
		}
		n++
		f := serve.Flags().Lookup(k.Flag)
		if f == nil {
			t.Errorf("knob %s's flag --%s is not registered", k.HCL, k.Flag)
			continue
		}
		if want := k.String(config.Default()); f.DefValue != want {
			t.Errorf("--%s defaults to %q, the knob's default is %q", k.Flag, f.DefValue, want)
		}
	}
	if n == 0 {
		t.Error("no knob has a flag")
	}
}

// A flag is checked as the file checks its knob, pins its setting against
// the file (unless the knob has an environment variable), and a pin that
// overrides the file says so.
func TestServeFlagPins(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		pinned []string
		err    string
	}{
		{args: []string{"--workers", "0"}, err: "--workers must be at least 1"},
		{args: []string{"--max-queued", "-3"}, err: "--max-queued must be at least 1"},
		{args: []string{"--lease-timeout", "0s"}, err: "--lease-timeout must be positive"},
		{args: []string{"--grace", "-1s"}, err: "--grace must not be negative"},
		{args: []string{"--run-budget", "-1"}, err: "--run-budget must not be negative"},
		{args: []string{"--log-level", "loud"}, err: `--log-level must be trace, debug, info, warn or error, not "loud"`},
		{args: []string{"--grace", "0s", "--queue-timeout", "-1s", "--workers", "8", "--store", "postgres://weir@db/weir", "--shared"},
			pinned: []string{"workers", "queue-timeout", "grace"}},
		{args: nil, pinned: nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			flags := config.Default()
			addKnobFlags(fs, flags)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			pins, err := flagPins(fs, flags)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, err := config.Parse([]byte("engine {\n  workers = 16\n}\n"), "weir.hcl")
			if err != nil {
				t.Fatal(err)
			}
			names, notes := applyPins(c, pins)
			if !reflect.DeepEqual(names, tt.pinned) {
				t.Errorf("pinned %q, want %q", names, tt.pinned)
			}
			if len(tt.pinned) == 0 {
				if c.Engine.Workers != 16 || len(notes) != 0 {
					t.Errorf("no flags: workers %d, notes %q", c.Engine.Workers, notes)
				}
				return
			}
			if c.Engine.Workers != 8 || c.Engine.QueueTimeout >= 0 || c.DrainGrace != 0 || c.Store.URL != "" {
				t.Errorf("after pins: %+v", c)
			}
			if want := "--workers pins 8; the file's 16 is not used"; len(notes) == 0 || notes[0] != want {
				t.Errorf("notes %q, want first %q", notes, want)
			}
		})
	}
}

// TestServeLogsJSON: with --log-format json every line the daemon writes,
// the plugin host's and its stdio relay's among them, is one JSON object
// with hclog's fields (a collector reads them), the serving line with its
// socket.
func TestServeLogsJSON(t *testing.T) {
	e2e(t, "starts a real daemon")
	d := newDaemon(t)
	d.serveArgs = []string{"--log-format", "json"}
	d.start("")
	d.register(`flow(name = "echo", nodes = [task("t", tool = "testkit.echo", args = lambda ctx: {"n": 1})])`)
	if _, v := d.runToEnd("echo", `{}`, ""); v.Phase != apitypes.PhaseCompleted {
		t.Fatalf("run ended %s %+v", v.Phase, v.Error)
	}
	d.stop()
	serving, plugin := false, false
	for _, line := range strings.Split(strings.TrimSpace(d.log()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q (%v)\n%s", line, err, d.log())
		}
		if m["@level"] == nil || m["@message"] == nil || m["@timestamp"] == nil {
			t.Errorf("a line without hclog's fields: %s", line)
		}
		serving = serving || m["@message"] == "serving" && m["socket"] == d.socket
		plugin = plugin || strings.HasPrefix(fmt.Sprint(m["@module"]), "weir.host.plugin") && strings.Contains(fmt.Sprint(m["path"]), "testkit")
	}
	if !serving || !plugin {
		t.Errorf("serving line %v, a line of the host launching testkit %v, want both:\n%s", serving, plugin, d.log())
	}
}
