package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
)

// The pages a reader follows command by command are run by this one
// runner, as the reader would: docs/tutorial.md whole, and the worked
// examples of other pages by section. In a page:
//
//   - a ```sh block is commands, run in order by one bash with -e -u and
//     pipefail, in a fresh directory; "```sh norun" is shown, not run (the
//     build and PATH set-up, which the runner does itself);
//   - a block whose info string has file=NAME (```json file=script.json)
//     is a file the reader saves; it is written before any command runs.
//
// weir and scripted-llm are on the PATH, built from this tree, WEIR_PLUGINS
// holds the first-party plugins pinned (as bin/plugins after make build),
// WEIR_DATA is a fresh directory. The model server's address in the page,
// 127.0.0.1:8089, is replaced by a free one, so pages run side by side;
// /path/to/weir, where a reader's clone is, by this checkout. The
// directory is outside the repository and GOWORK is off, as for a reader's
// own module; go reaches the module proxy as the environment says.

// docPage is what a page (or one section of it) gives the runner.
type docPage struct {
	files    map[string]string
	commands []string
}

var fenceRE = regexp.MustCompile("(?ms)^```([^\n`]*)\n(.*?)^```[ \t]*$")

// readDocPage reads the blocks of page, only those under the heading
// section (up to the next heading of its level or above) when it is set.
func readDocPage(t *testing.T, page, section string) docPage {
	t.Helper()
	return parseDocPage(t, page, readDoc(t, page), section)
}

func parseDocPage(t *testing.T, page, text, section string) docPage {
	t.Helper()
	if section != "" {
		level := strings.Count(strings.SplitN(section, " ", 2)[0], "#")
		i := strings.Index("\n"+text, "\n"+section+"\n")
		if i < 0 {
			t.Fatalf("%s has no heading %q", page, section)
		}
		text = text[i+len(section)+1:]
		for _, l := range strings.SplitAfter(text, "\n") {
			h := strings.SplitN(l, " ", 2)[0]
			if strings.HasPrefix(l, "#") && strings.Trim(h, "#") == "" && len(h) <= level {
				text = text[:strings.Index(text, l)]
				break
			}
		}
	}
	p := docPage{files: map[string]string{}}
	for _, m := range fenceRE.FindAllStringSubmatch(text, -1) {
		info, body := strings.Fields(m[1]), m[2]
		if len(info) == 0 {
			continue
		}
		file := ""
		for _, w := range info[1:] {
			if name, ok := strings.CutPrefix(w, "file="); ok {
				file = name
			}
		}
		switch {
		case file != "":
			if !filepath.IsLocal(file) {
				t.Fatalf("%s: file=%s is not a local path", page, file)
			}
			p.files[file] = body
		case info[0] == "sh" && !strings.Contains(m[1], "norun"):
			p.commands = append(p.commands, body)
		}
	}
	if len(p.commands) == 0 {
		t.Fatalf("%s %s: no sh block to run", page, section)
	}
	return p
}

// runDocPage runs the commands of page (or of one section) and returns
// what they printed, stdout and stderr together; the test fails if a
// command fails. Whatever the commands left running in the background is
// killed.
func runDocPage(t *testing.T, page, section string) string {
	t.Helper()
	p := readDocPage(t, page, section)
	model := freeLoopback(t)
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fix := strings.NewReplacer("127.0.0.1:8089", model, "/path/to/weir", checkout).Replace

	dir := t.TempDir()
	for name, body := range p.files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(fix(body)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, ".bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"weir": testutil.WeirBinary(t), "scripted-llm": testutil.Program(t, "scripted-llm")} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	sockDir := testutil.SocketDir(t)
	script := filepath.Join(dir, ".commands.sh")
	if err := os.WriteFile(script, []byte(fix(strings.Join(p.commands, "\n"))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, ".output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	// Bounds a page that hangs; a passing one ends long before.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-u", "-o", "pipefail", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), goCaches(t)...),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir,
		"GOWORK=off",
		"WEIR_DATA="+filepath.Join(dir, ".data"),
		"WEIR_SOCKET="+filepath.Join(sockDir, "s"),
		"WEIR_PLUGINS="+testutil.PinnedPlugins(t),
	)
	// Output to a file, not a pipe: a background command that outlives
	// bash would hold a pipe open.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the page left in the background
	}
	printed, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		t.Fatalf("%s %s: the commands failed (%v):\n%s", page, section, runErr, printed)
	}
	return string(printed)
}

// goCaches keeps go's module and build caches where they are, though
// HOME moves: a page that builds a module downloads nothing the
// repository's own build already fetched.
func goCaches(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		t.Fatalf("go env printed %q", out)
	}
	return []string{"GOMODCACHE=" + v[0], "GOCACHE=" + v[1], "GOPATH=" + v[2]}
}

// freeLoopback returns a loopback address no one listened on a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The runner reads what a page says: files, commands to run and commands
// only shown, within the section asked for.
func TestDocPageRunnerReadsBlocks(t *testing.T) {
	t.Parallel()
	page := "## One\n\n```sh norun\nmake build\n```\n\n```json file=s.json\n{\"steps\": []}\n```\n\n```sh\necho one\n```\n\n" +
		"```python\nnot a file\n```\n\n### Inside\n\n```sh\necho inside\n```\n\n## Two\n\n```sh\necho two\n```\n"
	p := parseDocPage(t, "page.md", page, "## One")
	if len(p.files) != 1 || p.files["s.json"] != "{\"steps\": []}\n" {
		t.Errorf("files %q", p.files)
	}
	if strings.Join(p.commands, "") != "echo one\necho inside\n" {
		t.Errorf("commands %q", p.commands)
	}
	if all := parseDocPage(t, "page.md", page, ""); len(all.commands) != 3 {
		t.Errorf("the whole page: commands %q", all.commands)
	}
}

// docs/agents.md's worked example of a script for a fan-out of sub-agents
// runs as printed: every step is played, each sub-agent gets its own
// answers, and the run ends with both.
func TestAgentsDocScriptExample(t *testing.T) {
	t.Parallel()
	out := runDocPage(t, "docs/agents.md", "## Script the model")
	t.Log(out)
	for _, want := range []string{"A lease is a time-bounded claim on a task.", "A cohort is one visit of a fan-out.", "5 turns", "0 steps unplayed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the example did not print %q:\n%s", want, out)
		}
	}
}

// docs/api.md's recipe for using the Go client from a module of one's own
// (a replace to a clone, until weir is tagged) builds and runs, outside
// the repository and its go.work.
func TestAPIDocModuleRecipe(t *testing.T) {
	t.Parallel()
	out := runDocPage(t, "docs/api.md", "## Depend on it from your module")
	if !strings.Contains(out, "no daemon answers: true") {
		t.Fatalf("the program printed:\n%s", out)
	}
}

// docs/plugins.md's recipe for a plugin built against the sdk before it
// is published builds, installs and answers a call.
func TestPluginsDocModuleRecipe(t *testing.T) {
	t.Parallel()
	out := runDocPage(t, "docs/plugins.md", "## Build against the sdk before it is published")
	if !strings.Contains(out, `"greeting": "Hello, Ada!"`) {
		t.Fatalf("the tool call printed:\n%s", out)
	}
}

// docs/tutorial.md runs as printed, start to end: the agent notes its
// plan, the mail waits for and gets its approval and goes out once, and a
// budget too small refuses the turn before the model is asked.
func TestTutorial(t *testing.T) {
	t.Parallel()
	out := runDocPage(t, "docs/tutorial.md", "")
	t.Log(out)
	for _, want := range []string{
		"ok  launch", // flow check
		"wait:     planner@1.2.0 (approval)",
		`"summary":"The plan is noted and mailed to the team."`,
		`"subject":"Launch plan"`,
		"E_BUDGET_EXHAUSTED",
		"exit 1",
		"3 turns",
		"0 steps unplayed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the tutorial did not print %q", want)
		}
	}
	if n := strings.Count(out, `"from":"weir@localhost"`); n != 1 {
		t.Errorf("the outbox holds %d mails, want 1", n)
	}
}

// The README leads to the tutorial, and the tutorial back to the pages
// it names: a page nobody links to is not read.
func TestTutorialIsLinked(t *testing.T) {
	t.Parallel()
	if readme := readDoc(t, "README.md"); !strings.Contains(readme, "(docs/tutorial.md)") {
		t.Error("README.md does not link docs/tutorial.md")
	}
	tutorial := readDoc(t, "docs/tutorial.md")
	for _, m := range regexp.MustCompile(`\]\(([a-z]+\.md)(#[a-z0-9-]+)?\)`).FindAllStringSubmatch(tutorial, -1) {
		page := strings.ToLower(readDoc(t, filepath.Join("docs", m[1])))
		if heading := "\n## " + strings.ReplaceAll(strings.TrimPrefix(m[2], "#"), "-", " "); m[2] != "" && !strings.Contains(page, heading) {
			t.Errorf("docs/tutorial.md links %s%s: no such heading", m[1], m[2])
		}
	}
}
