package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
)

// weirIn drives Main in-process like run, with stdin.
func weirIn(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := NewMain()
	m.Env = func(k string) string { return env[k] }
	code := m.Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestPluginAndToolCommands is one user's session, in order: the subtests
// share the plugins directory the earlier ones filled.
func TestPluginAndToolCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds real plugin binaries")
	}
	bin := testutil.PluginDir(t)
	data := t.TempDir()
	plugins := filepath.Join(t.TempDir(), "plugins")
	env := map[string]string{"WEIR_DATA": data, "WEIR_PLUGINS": plugins}
	weir := func(t *testing.T, stdin string, args ...string) (int, string, string) {
		t.Helper()
		return weirIn(t, env, stdin, args...)
	}
	expect := func(t *testing.T, code, want int, out, errb string) {
		t.Helper()
		if code != want {
			t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, want, out, errb)
		}
	}

	t.Run("ls empty", func(t *testing.T) {
		code, out, errb := weir(t, "", "plugin", "ls")
		expect(t, code, 0, out, errb)
		if !strings.Contains(out, "no plugins installed") {
			t.Fatalf("ls printed %q", out)
		}
	})
	t.Run("install", func(t *testing.T) {
		code, out, errb := weir(t, "", "plugin", "install", filepath.Join(bin, "testkit"), filepath.Join(bin, "mail"))
		expect(t, code, 0, out, errb)
		if !strings.Contains(out, "installed testkit (sha256:") || !strings.Contains(out, "installed mail (sha256:") {
			t.Fatalf("install printed %q", out)
		}
		code, out, errb = weir(t, "", "plugin", "install", filepath.Join(bin, "nope"))
		expect(t, code, exitFailed, out, errb)
	})
	t.Run("ls", func(t *testing.T) {
		code, out, errb := weir(t, "", "plugin", "ls")
		expect(t, code, 0, out, errb)
		for _, want := range []string{"testkit  sha256:", "ok  13 tools", "testkit.echo", "mail.send  at_most_once +probe", `testkit.sleep input: {"type":"object"`} {
			if !strings.Contains(out, want) {
				t.Errorf("ls output lacks %q:\n%s", want, out)
			}
		}
		for _, want := range []string{`testkit\.echo +read +cost`, `testkit\.once +at_most_once \+probe +cost`, `testkit\.exclusive +at_most_once +cost`, `testkit\.sleep +idempotent +cost`} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("ls output lacks %s:\n%s", want, out)
			}
		}
		code, out, errb = weir(t, "", "plugin", "ls", "--json")
		expect(t, code, 0, out, errb)
		var l pluginListing
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("ls --json: %v\n%s", err, out)
		}
		if len(l.Plugins) != 2 || l.Plugins[0].Name != "mail" || l.Plugins[0].Status != "ok" ||
			len(l.Plugins[0].Tools) != 1 || l.Plugins[0].Tools[0].Idempotent || len(l.Plugins[0].Tools[0].InputSchema) == 0 ||
			l.Plugins[0].Tools[0].Effect != flows.EffectAtMostOnce || !l.Plugins[0].Tools[0].Reconcile {
			t.Fatalf("ls --json: %+v", l)
		}
	})
	t.Run("describe", func(t *testing.T) {
		code, out, errb := weir(t, "", "tool", "describe", "mail.send")
		expect(t, code, 0, out, errb)
		for _, want := range []string{"mail.send\n", "class        at_most_once (", "probe        yes", "cost         0 per call",
			"timeout      none declared", `input        {"type":"object","required":["to","body"]`, `output       {"type":"object"`, "plugin       mail (sha256:"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe lacks %q:\n%s", want, out)
			}
		}
		code, out, errb = weir(t, "", "tool", "describe", "testkit.bounded", "--json")
		expect(t, code, 0, out, errb)
		var d toolDescription
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("describe --json: %v\n%s", err, out)
		}
		if d.Name != "testkit.bounded" || d.Plugin != "testkit" || d.Class != flows.EffectIdempotent || d.Reconcile || d.TimeoutMS != 500 ||
			!strings.Contains(string(d.InputSchema), `"wait"`) || d.ProtocolVersion != 2 {
			t.Fatalf("describe --json: %+v", d)
		}
		code, out, errb = weir(t, "", "tool", "describe", "testkit.ech")
		expect(t, code, exitFailed, out, errb)
		if !strings.Contains(errb, "unknown_tool") || !strings.Contains(errb, `did you mean "testkit.echo"`) {
			t.Errorf("describe of a misspelt tool: %q", errb)
		}
		code, out, errb = weir(t, "", "tool", "describe", "nodot")
		expect(t, code, exitUsage, out, errb)
	})
	t.Run("call echo", func(t *testing.T) {
		code, out, errb := weir(t, "", "tool", "call", "testkit.echo", "--input", `{"a":[1,2]}`)
		expect(t, code, 0, out, errb)
		var got map[string][]int
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got["a"]) != 2 {
			t.Fatalf("echo printed %q (%v)", out, err)
		}
		code, out, errb = weir(t, `{"from":"stdin"}`, "tool", "call", "testkit.echo", "--input", "-")
		expect(t, code, 0, out, errb)
		if !strings.Contains(out, `"from": "stdin"`) {
			t.Fatalf("echo of stdin printed %q", out)
		}
	})
	t.Run("call refusals", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"testkit.sleep", "--input", `{"ms":"x"}`}, exitFailed, "schema"},
			{[]string{"testkit.echo", "--input", `{not json`}, exitFailed, "schema"},
			{[]string{"testkit.nope"}, exitFailed, "unknown_tool"},
			{[]string{"nodot"}, exitUsage, "plugin.tool"},
			{[]string{"testkit.sleep", "--input", `{"ms":5000}`, "--timeout", "100ms"}, exitFailed, "deadline"},
			{[]string{"testkit.crash"}, exitFailed, "crashed"},
		} {
			code, out, errb := weir(t, "", append([]string{"tool", "call"}, c.args...)...)
			expect(t, code, c.code, out, errb)
			if !strings.Contains(errb, c.want) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errb, c.want)
			}
		}
	})
	t.Run("retry with a key", func(t *testing.T) {
		args := []string{"tool", "call", "testkit.fail", "--input", `{"times":1}`, "--idempotency-key", "k1"}
		code, out, errb := weir(t, "", args...)
		expect(t, code, exitFailed, out, errb)
		if !strings.Contains(errb, "retryable") {
			t.Fatalf("first attempt: %q", errb)
		}
		code, out, errb = weir(t, "", args...)
		expect(t, code, 0, out, errb)
		if !strings.Contains(out, `"attempts": 2`) {
			t.Fatalf("second attempt printed %q", out)
		}
	})
	t.Run("state and config", func(t *testing.T) {
		code, out, errb := weir(t, "", "tool", "call", "mail.send", "--input", `{"to":"ada@example.com","subject":"hi","body":"hello"}`)
		expect(t, code, 0, out, errb)
		outbox, err := os.ReadFile(filepath.Join(data, "plugin-state", "mail", "outbox.jsonl"))
		if err != nil || strings.Count(string(outbox), "\n") != 1 || !strings.Contains(string(outbox), "ada@example.com") {
			t.Fatalf("outbox %q, %v", outbox, err)
		}
		code, out, errb = weir(t, "", "tool", "call", "testkit.env", "--plugin-config", `{"x":1}`)
		expect(t, code, 0, out, errb)
		if !strings.Contains(out, `"x": 1`) {
			t.Fatalf("plugin config not passed: %s", out)
		}
	})
	t.Run("tampered binary", func(t *testing.T) {
		f, err := os.OpenFile(filepath.Join(plugins, "testkit"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("tampered")
		f.Close()
		code, out, errb := weir(t, "", "plugin", "ls")
		expect(t, code, 0, out, errb)
		if !strings.Contains(out, "testkit  sha256:") || !strings.Contains(out, "modified") {
			t.Fatalf("ls does not flag the tampered binary:\n%s", out)
		}
		code, out, errb = weir(t, "", "tool", "call", "testkit.echo")
		expect(t, code, exitFailed, out, errb)
		if !strings.Contains(errb, "checksum") {
			t.Fatalf("stderr %q lacks checksum", errb)
		}
	})
}
