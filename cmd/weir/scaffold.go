package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/sdk/wire"
)

// sdkModule is the module a plugin builds against.
const sdkModule = "github.com/weirhq/weir/sdk"

func flowNewCommand(m *Main) *cobra.Command {
	var dir, tool, lang string
	cmd := &cobra.Command{
		Use:   "new NAME[.star|.lua]",
		Short: "Write a starter flow, NAME.star or NAME.lua, checked against the installed plugins",
		Long: `new writes DIR/NAME.star (DIR defaults to the working directory), or
DIR/NAME.lua with --lang lua or a NAME ending in .lua: a flow named NAME
with one task calling TOOL (--tool; default testkit.echo when it is
installed, else the first installed idempotent tool) and an output. The
file is checked as 'weir flow check' would before it is written; an existing
file is never overwritten.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, ext, err := starterName(args[0], lang)
			if err != nil {
				return err
			}
			cat, err := installedCatalog(m, nil)
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("reading the installed plugins' catalog: %w", err)}
			}
			if tool == "" {
				if tool = starterTool(cat); tool == "" {
					return usageErrorf("no idempotent tool is installed in %s to start from: install a plugin (weir plugin install PATH) or pass --tool", m.PluginsDir)
				}
			}
			info, _ := cat.LookupTool(tool)
			path := filepath.Join(dir, name+ext)
			tmpl := starterFlow
			if ext == ".lua" {
				tmpl = starterFlowLua
			}
			src, err := execTemplate(tmpl, map[string]any{"Name": name, "Tool": tool, "Path": path, "Idempotent": info.Idempotent, "Echo": tool == "testkit.echo"})
			if err != nil {
				return err
			}
			mod, ds := script.Check([]flows.File{{Path: path, Src: src}}, cat)
			if len(ds) > 0 {
				_ = ds.WriteText(m.Stderr)
				return &exitError{code: exitFailed, err: fmt.Errorf("the starter flow does not check (see above); nothing written")}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := writeNew(path, src, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(m.Stdout, "wrote %s: flow %s, %s, checked against the plugins in %s\n", path, name, count(len(mod.Flows[0].Nodes), "node"), m.PluginsDir)
			fmt.Fprintf(m.Stdout, "next: weir exec %s --input '{\"name\": \"Ada\"}'\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write the file in")
	cmd.Flags().StringVar(&tool, "tool", "", "the tool the starter's task calls (default: testkit.echo, or the first installed idempotent tool)")
	cmd.Flags().StringVar(&lang, "lang", "", "the flow language: star (default) or lua; a NAME ending in .star or .lua says it too")
	return cmd
}

// starterName splits flow new's argument into the flow name and the
// file's extension, from the argument's own extension or --lang.
func starterName(arg, lang string) (name, ext string, err error) {
	langs := map[string]string{"star": ".star", "starlark": ".star", "lua": ".lua"}
	if lang != "" && langs[lang] == "" {
		return "", "", usageErrorf("--lang %q: the flow languages are star and lua", lang)
	}
	name, ext = arg, langs[lang]
	for _, e := range []string{".star", ".lua"} {
		if strings.HasSuffix(arg, e) {
			if ext != "" && ext != e {
				return "", "", usageErrorf("%s is a %s file, but --lang is %s", arg, e, lang)
			}
			name, ext = strings.TrimSuffix(arg, e), e
		}
	}
	if ext == "" {
		ext = ".star"
	}
	return name, ext, nil
}

// starterTool picks the tool a starter flow calls: testkit.echo (any input
// will do) if installed, else the first idempotent tool.
func starterTool(cat flows.Catalog) string {
	if _, ok := cat.LookupTool("testkit.echo"); ok {
		return "testkit.echo"
	}
	named, ok := cat.(flows.ToolLister)
	if !ok {
		return ""
	}
	for _, n := range named.Names() {
		if info, _ := cat.LookupTool(n); info.Idempotent && !info.Chat {
			return n
		}
	}
	return ""
}

var starterFlow = template.Must(template.New("flow").Parse(`# {{.Path}}: a starter flow (docs/flows.md describes every builtin).
#
#   weir flow check {{.Path}}
#   weir exec {{.Path}} --input '{"name": "Ada"}'
flow(
    name = "{{.Name}}",
    doc = "Call {{.Tool}} with the run's input and answer what it returned.",
    nodes = [
{{- if .Echo}}
        task("first", tool = "{{.Tool}}", args = lambda ctx: {"hello": ctx.input}, retries = 2, timeout = "30s"),
{{- else}}
        # The input must fit {{.Tool}}'s input schema: weir plugin ls shows it.
        task("first", tool = "{{.Tool}}", args = lambda ctx: ctx.input{{if .Idempotent}}, retries = 2{{else}}, at_most_once = True{{end}}, timeout = "30s"),
{{- end}}
    ],
    output = lambda ctx: ctx.results["first"],
)
`))

var starterFlowLua = template.Must(template.New("flow").Parse(`-- {{.Path}}: a starter flow in Lua (docs/flows.md describes every builtin).
--
--   weir flow check {{.Path}}
--   weir exec {{.Path}} --input '{"name": "Ada"}'
flow{"{{.Name}}",
  doc = "Call {{.Tool}} with the run's input and answer what it returned.",
  nodes = {
{{- if .Echo}}
    task{"first", tool = "{{.Tool}}", args = function(ctx) return {hello = ctx.input} end, retries = 2, timeout = "30s"},
{{- else}}
    -- The input must fit {{.Tool}}'s input schema: weir plugin ls shows it.
    task{"first", tool = "{{.Tool}}", args = function(ctx) return ctx.input end{{if .Idempotent}}, retries = 2{{else}}, at_most_once = true{{end}}, timeout = "30s"},
{{- end}}
  },
  output = function(ctx) return ctx.results.first end,
}
`))

func pluginNewCmd(m *Main) *cobra.Command {
	var dir, sdkDir, module string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Write a plugin module with one tool and its test, ready to build and install",
		Long: `new writes a Go module in DIR (default ./NAME): go.mod, main.go serving one
tool, NAME.hello, and main_test.go testing it with sdk/sdktest. It builds
against weir's sdk module found at --sdk (default: the sdk directory of the
checkout this weir was built in, found beside its binary or above the
working directory), with a replace directive until the sdk is published
(docs/plugins.md). Then:

  cd NAME && go test ./... && go build -o NAME . && weir plugin install ./NAME`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := wire.CheckPluginName(name); err != nil {
				return usageErrorf("%v", err)
			}
			if dir == "" {
				dir = name
			}
			if module == "" {
				module = "example.com/" + name
			}
			if sdkDir == "" {
				sdkDir = findSDK()
				if sdkDir == "" {
					return usageErrorf("cannot find weir's sdk module (github.com/weirhq/weir/sdk): pass --sdk /path/to/weir/sdk")
				}
			}
			sdkDir, err := filepath.Abs(sdkDir)
			if err != nil {
				return usageErrorf("--sdk: %v", err)
			}
			goVersion, requires, err := readSDKMod(sdkDir)
			if err != nil {
				return usageErrorf("--sdk: %v", err)
			}
			sum, err := os.ReadFile(filepath.Join(sdkDir, "go.sum"))
			if err != nil {
				return usageErrorf("--sdk: %v", err)
			}
			data := map[string]any{"Name": name, "Module": module, "SDK": sdkDir, "Go": goVersion, "Requires": requires}
			files := []struct {
				name string
				tmpl *template.Template
			}{{"go.mod", pluginGoMod}, {"main.go", pluginMain}, {"main_test.go", pluginTest}}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for _, f := range files {
				b, err := execTemplate(f.tmpl, data)
				if err != nil {
					return err
				}
				if err := writeNew(filepath.Join(dir, f.name), b, 0o644); err != nil {
					return err
				}
			}
			if err := writeNew(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(m.Stdout, "wrote plugin %s in %s: go.mod (sdk at %s), main.go (tool %s.hello), main_test.go, go.sum\n", name, dir, sdkDir, name)
			fmt.Fprintf(m.Stdout, "next: cd %s && go test ./... && go build -o %s . && weir plugin install ./%s\n", dir, name, name)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the module in (default ./NAME)")
	cmd.Flags().StringVar(&sdkDir, "sdk", "", "weir's sdk directory to build against (default: found from weir's checkout)")
	cmd.Flags().StringVar(&module, "module", "", "the module path (default example.com/NAME)")
	return cmd
}

// findSDK looks for weir's sdk module beside the running binary's checkout
// (bin/weir in a checkout) and above the working directory.
func findSDK() string {
	var starts []string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for {
			if isSDK(filepath.Join(d, "sdk")) {
				return filepath.Join(d, "sdk")
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return ""
}

func isSDK(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+sdkModule+"\n"))
}

// readSDKMod reads the sdk's go version and requirements: a plugin needs
// the same ones (as indirect requirements) to build with the sdk's go.sum,
// offline and as is.
func readSDKMod(dir string) (goVersion string, requires []string, err error) {
	if !isSDK(dir) {
		return "", nil, fmt.Errorf("%s holds no go.mod of module %s", dir, sdkModule)
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inBlock := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line, _, _ = strings.Cut(line, "//")
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "go "):
			goVersion = strings.TrimSpace(strings.TrimPrefix(line, "go "))
		case line == "require (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "":
			requires = append(requires, line)
		case strings.HasPrefix(line, "require "):
			requires = append(requires, strings.TrimSpace(strings.TrimPrefix(line, "require ")))
		}
	}
	if err := sc.Err(); err != nil {
		return "", nil, err
	}
	if goVersion == "" {
		return "", nil, fmt.Errorf("%s/go.mod has no go directive", dir)
	}
	return goVersion, requires, nil
}

var pluginGoMod = template.Must(template.New("go.mod").Parse(`module {{.Module}}

go {{.Go}}

// Until the sdk is published, a replace points at a checkout of weir and
// the version required is a placeholder (docs/plugins.md).
require github.com/weirhq/weir/sdk v0.0.0

require (
{{- range .Requires}}
	{{.}} // indirect
{{- end}}
)

replace github.com/weirhq/weir/sdk => {{.SDK}}
`))

var pluginMain = template.Must(template.New("main.go").Parse(`// Command {{.Name}} is a weir tool plugin: install it with
// weir plugin install ./{{.Name}} and call it with
// weir tool call {{.Name}}.hello --input '{"name": "Ada"}'.
package main

import (
	"context"
	"errors"

	"github.com/weirhq/weir/sdk"
)

type helloIn struct {
	Name string ` + "`json:\"name\"`" + `
	// Shout is optional: omitempty.
	Shout bool ` + "`json:\"shout,omitempty\"`" + `
}

type helloOut struct {
	Greeting string ` + "`json:\"greeting\"`" + `
}

// hello greets; calling it twice with the same input has the effect of
// calling it once, so it is declared idempotent and weir may retry it.
func hello(ctx context.Context, call *sdk.Call, in helloIn) (helloOut, error) {
	if in.Name == "" {
		return helloOut{}, sdk.WithCode(errors.New("name is empty"), "E_NO_NAME")
	}
	g := "Hello, " + in.Name + "!"
	if in.Shout {
		g = "HELLO, " + in.Name + "!"
	}
	return helloOut{Greeting: g}, nil
}

var tools = []sdk.Tool{
	sdk.NewTool("{{.Name}}.hello", hello,
		sdk.Description("Greet someone by name."),
		sdk.Idempotent(),
	),
}

func main() { sdk.Serve(tools...) }
`))

var pluginTest = template.Must(template.New("main_test.go").Parse(`package main

import (
	"context"
	"errors"
	"testing"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/sdktest"
)

func TestToolsDeclareWell(t *testing.T) {
	if err := sdk.CheckTools(tools...); err != nil {
		t.Fatal(err)
	}
}

func TestHello(t *testing.T) {
	ctx := context.Background()
	res, err := sdktest.Call(ctx, tools[0], sdktest.Request{Input: ` + "`" + `{"name":"Ada"}` + "`" + `, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Output); got != ` + "`" + `{"greeting":"Hello, Ada!"}` + "`" + ` {
		t.Errorf("output %s", got)
	}
	// An unknown key is refused before the tool runs.
	_, err = sdktest.Call(ctx, tools[0], sdktest.Request{Input: ` + "`" + `{"nmae":"Ada"}` + "`" + `, StateDir: t.TempDir()})
	var se *sdktest.Error
	if !errors.As(err, &se) || se.Kind != sdktest.KindSchema {
		t.Errorf("misspelt key: %v, want a schema error", err)
	}
	// An empty name fails permanently with its code.
	_, err = sdktest.Call(ctx, tools[0], sdktest.Request{Input: ` + "`" + `{"name":""}` + "`" + `, StateDir: t.TempDir()})
	if !errors.As(err, &se) || se.Kind != sdktest.KindPermanent || se.Code != "E_NO_NAME" {
		t.Errorf("empty name: %v, want permanent E_NO_NAME", err)
	}
}
`))

func execTemplate(t *template.Template, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeNew writes a new file, refusing to overwrite one.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s exists: not overwritten", path)}
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
