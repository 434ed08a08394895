package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateFlowGolden = flag.Bool("update", false, "rewrite the golden files of the flow command tests")

func checkFlowGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "flow", name)
	if *updateFlowGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestFlowCheck(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOME": "/h", "WEIR_PLUGINS": "/no/plugins"}
	const dir = "testdata/flow/"
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string // stdout
		stderr string // substring; empty: stderr must be empty
	}{
		{"clean", []string{"--tools", dir + "catalog.json", dir + "ok.star"}, exitOK, "check_ok.golden", ""},
		{"clean json", []string{"--json", "--tools", dir + "catalog.json", dir + "ok.star"}, exitOK, "check_ok.json.golden", ""},
		{"problems", []string{"--tools", dir + "catalog.json", dir + "bad.star"}, exitFailed, "check_bad.golden", "weir: 6 problems in 1 file"},
		{"problems json", []string{"--tools", dir + "catalog.json", "--json", dir + "bad.star"}, exitFailed, "check_bad.json.golden", "weir: 6 problems in 1 file"},
		{"warnings only: exit 0", []string{"--tools", dir + "catalog.json", dir + "warn.star"}, exitOK, "check_warn.golden", ""},
		{"warnings only json", []string{"--json", "--tools", dir + "catalog.json", dir + "warn.star"}, exitOK, "check_warn.json.golden", ""},
		{"compiled graph over MaxIRBytes", []string{"--tools", dir + "catalog.json", dir + "huge_ir.star"}, exitFailed, "check_huge_ir.golden", "weir: 1 problem in 1 file"},
		{"no catalog: every tool is unknown", []string{dir + "ok.star"}, exitFailed, "check_nocatalog.golden", "plugins installed in /no/plugins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errb, _ := run(t, env, append([]string{"flow", "check"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errb)
			}
			if tt.stderr == "" && errb != "" || !strings.Contains(errb, tt.stderr) {
				t.Errorf("stderr %q, want %q", errb, tt.stderr)
			}
			checkFlowGolden(t, tt.golden, out)
		})
	}
}

func TestFlowCheckJSONIsMachineReadable(t *testing.T) {
	t.Parallel()
	_, out, _, _ := run(t, map[string]string{"HOME": "/h"}, "flow", "check", "--json",
		"--tools", "testdata/flow/catalog.json", "testdata/flow/bad.star")
	var ds []struct {
		File    string   `json:"file"`
		Line    int      `json:"line"`
		Col     int      `json:"col"`
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Chain   []string `json:"chain"`
	}
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, d := range ds {
		if d.Code == "E_CYCLE" {
			found = true
			if d.File != "testdata/flow/bad.star" || d.Line != 7 || strings.Join(d.Chain, " -> ") != "digest -> digest" {
				t.Errorf("cycle diagnostic %+v", d)
			}
		}
	}
	if !found {
		t.Errorf("no E_CYCLE in %s", out)
	}
}

// The examples check clean against their catalog, as make demo shows.
func TestFlowCheckExamples(t *testing.T) {
	t.Parallel()
	code, out, errb, _ := run(t, map[string]string{"HOME": "/h"}, "flow", "check",
		"--tools", "../../examples/catalog.json", "../../examples/research.star", "../../examples/summarize.star")
	if code != exitOK || errb != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errb, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ok  research ") || !strings.HasPrefix(lines[1], "ok  summarize ") {
		t.Errorf("summary:\n%s", out)
	}
}

func TestFlowUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"flow"},
		{"flow", "nope"},
		{"flow", "check"},
		{"flow", "check", "testdata/flow/no-such-file.star"},
		{"flow", "check", "--tools", "testdata/flow/no-such-catalog.json", "testdata/flow/ok.star"},
		{"flow", "check", "--tools", "testdata/flow/ok.star", "testdata/flow/ok.star"}, // not a catalog
		{"flow", "check", "--no-such-flag", "testdata/flow/ok.star"},
	} {
		code, out, errb, _ := run(t, map[string]string{"HOME": "/h"}, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, errb)
		}
		if errb == "" || out != "" {
			t.Errorf("%v: stdout %q, stderr %q", args, out, errb)
		}
	}
}
