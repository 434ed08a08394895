package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// tsNodeModules is where `npm ci --prefix tools/npm` installs the
// official MCP TypeScript SDK (pinned in tools/npm/package-lock.json).
const tsNodeModules = "../../tools/npm/node_modules"

// needTSClient skips a test that needs node and the TypeScript SDK where
// they are missing, saying so in one line, unless WEIR_TEST_NPM=required
// (CI, after .ci/run's npm ci) makes that a failure.
func needTSClient(t *testing.T) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(tsNodeModules, "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("WEIR_TEST_NPM") == "required" {
			t.Fatalf("node or the MCP TypeScript SDK is missing and WEIR_TEST_NPM=required (npm ci --prefix tools/npm): %v", err)
		}
		t.Skipf("node or the MCP TypeScript SDK is missing (npm ci --prefix tools/npm installs it): %v", err)
	}
	modules, err = filepath.Abs(tsNodeModules)
	if err != nil {
		t.Fatal(err)
	}
	return node, modules
}

// TestMCPTypeScriptClient drives `weir mcp --listen`, stateful and
// stateless, with the official MCP TypeScript SDK's client
// (testdata/mcp-ts-client.cjs): it lists the tools, runs a flow, gets
// the early answer of a run that outlasts a 2 s bound (with progress),
// decides a human wait (by elicitation on a session, by approve_wait
// without), and, on a session, hears tools/list_changed when a flow is
// registered.
func TestMCPTypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real daemon")
	}
	node, modules := needTSClient(t)
	t.Parallel()
	d, tcp := tokenDaemon(t)
	alice, err := client.New("http://"+tcp, client.WithToken("alice-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alice.Close)
	for _, mode := range []string{"stateful", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			flags := []string{"--follow", "2s"}
			if mode == "stateless" {
				flags = append(flags, "--stateless")
			}
			endpoint, logs, _ := listenMCP(t, d, tcp, flags...)
			cmd := exec.Command(node, "testdata/mcp-ts-client.cjs", endpoint, "alice-token-0123456789", mode)
			cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
			stderr := &testutil.Buffer{}
			cmd.Stderr = stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// A client that hangs is ended: its output then closes.
			hung := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
			waited := false
			t.Cleanup(func() {
				hung.Stop()
				if !waited {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})
			steps := map[string]map[string]any{}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var m map[string]any
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("the client printed %q: %v", sc.Text(), err)
				}
				t.Logf("%s", sc.Bytes())
				step, _ := m["step"].(string)
				steps[step] = m
				switch step {
				case "error":
					t.Fatalf("the TypeScript client: %v %v\n%s\nweir mcp:\n%s", m["message"], m["got"], stderr, logs)
				case "register":
					d.register(`flow(name = "later", nodes = [task("t", tool = "testkit.echo")])`)
				}
			}
			waited = true
			if err := cmd.Wait(); err != nil || !hung.Stop() {
				t.Fatalf("the TypeScript client: %v (ended within 2 min: %v)\n%s\nweir mcp:\n%s", err, err == nil, stderr, logs)
			}
			want := []string{"connected", "tools", "greet", "early", "approved", "done"}
			if mode == "stateful" {
				want = append(want, "register", "changed")
			}
			for _, s := range want {
				if steps[s] == nil {
					t.Fatalf("the client never reached %q: %v\n%s", s, steps, stderr)
				}
			}
			if v := steps["connected"]["version"]; v == "" || v == nil {
				t.Errorf("serverInfo.version %v", v)
			}
			if sid, _ := steps["connected"]["session"].(string); (mode == "stateful") != (sid != "") {
				t.Errorf("%s: session id %q", mode, sid)
			}
			// The early answer came near the 2 s bound, its run goes on.
			early := steps["early"]
			if ms, _ := early["ms"].(float64); ms < 1500 || ms > 30000 || !strings.Contains(fmt.Sprint(early["text"]), "still working") {
				t.Errorf("the early answer after %v ms: %v", early["ms"], early["text"])
			}
			id, _ := early["run_id"].(string)
			ctx := context.Background()
			if v, err := alice.RunGet(ctx, id); err != nil || v.Phase.Terminal() {
				t.Fatalf("the early-answered run: %+v %v, want it going on", v, err)
			}
			if _, err := alice.RunCancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			if v, err := alice.RunGet(ctx, fmt.Sprint(steps["approved"]["run_id"])); err != nil || v.Phase != apitypes.PhaseCompleted {
				t.Fatalf("the approved run: %+v %v", v, err)
			}
		})
	}
	d.stop()
}
