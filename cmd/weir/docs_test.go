package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/host"
)

// Checks that keep the docs true to the code, one per drift found by a
// newcomer: each reads a page and compares it with what the code does.

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocsListenAddressesAreFree: an address the docs tell a command to
// listen on (weir mcp --listen) is not the console's or the API's default
// address: copied as printed, it would collide with a daemon's console.
func TestDocsListenAddressesAreFree(t *testing.T) {
	t.Parallel()
	taken := map[string]string{config.DefaultConsoleAddress: "the console's default address", "127.0.0.1:7411": "the TCP API's default address"}
	listen := regexp.MustCompile(`--listen[ =](\S+)`)
	for _, doc := range []string{"docs/mcp.md", "docs/operators.md", "README.md"} {
		for _, m := range listen.FindAllStringSubmatch(readDoc(t, doc), -1) {
			if why, ok := taken[strings.Trim(m[1], "`'\"")]; ok {
				t.Errorf("%s: %s listens on %s", doc, m[0], why)
			}
		}
	}
}

// TestDocsHeadingsNotDoubled: no heading of the operators' guide (or the
// other pages) is written twice on one line, "### A### A".
func TestDocsHeadingsNotDoubled(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs (%v)", err)
	}
	runOn := regexp.MustCompile(`[^#\s]#{2,} `) // "commands### Admin"
	for _, path := range append(docs, filepath.Join("..", "..", "README.md")) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inCode := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
			}
			if !inCode && strings.HasPrefix(line, "#") && runOn.MatchString(line) {
				t.Errorf("%s:%d: a heading run into another: %q", filepath.Base(path), i+1, line)
			}
		}
	}
}

// TestDocsBundledPluginTools: the bundled plugins' table in
// docs/plugins.md lists every tool each plugin declares.
func TestDocsBundledPluginTools(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "docs/plugins.md")
	dir := t.TempDir()
	for _, name := range []string{"testkit", "mail", "http", "llm"} {
		m, err := host.Install(dir, testutil.Plugin(t, name), nil)
		if err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
		row := ""
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "| `"+name+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("docs/plugins.md has no row for the bundled plugin %s", name)
			continue
		}
		tools := strings.Split(row, "|")[2]
		for _, tool := range m.Tools {
			short := strings.TrimPrefix(tool.Name, name+".")
			if !strings.Contains(tools, "`"+tool.Name+"`") && !strings.Contains(tools, "`"+short+"`") {
				t.Errorf("docs/plugins.md's row for %s lacks %s: %s", name, tool.Name, tools)
			}
		}
	}
}

// TestPluginInstallNamesNoUnrelatedSocket: installing into a plugins
// directory of its own (make build's bin/plugins) with no daemon running
// does not name the default data directory's socket, which has nothing
// to do with it; installing into the data directory's plugins does.
func TestPluginInstallNamesNoUnrelatedSocket(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	bin := filepath.Join(t.TempDir(), "plugins")
	code, out, errb, _ := run(t, env, "--plugins", bin, "plugin", "install", testutil.Plugin(t, "testkit"))
	if code != 0 || strings.Contains(out+errb, ".local/share") || !strings.Contains(out, "a daemon started with --plugins "+bin+" will serve it") {
		t.Errorf("install into %s: exit %d\n%s%s", bin, code, out, errb)
	}
	code, out, errb, _ = run(t, env, "plugin", "install", testutil.Plugin(t, "testkit"))
	if code != 0 || !strings.Contains(out, "no daemon answers on "+filepath.Join(home, ".local", "share", "weir", "weir.sock")) {
		t.Errorf("install into the data directory: exit %d\n%s%s", code, out, errb)
	}
}
