// The MCP example against software nobody here wrote: the reference
// server-everything (npm @modelcontextprotocol/server-everything, pinned
// in tools/npm) over streamable HTTP, restarted in the middle.
package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/host"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("mcp")) }

// everythingScript is server-everything's entry point as `npm ci --prefix
// tools/npm` installs it.
const everythingScript = "../../tools/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// needEverything skips where node or server-everything is missing, saying
// so in one line, unless WEIR_TEST_NPM=required (CI) makes that a failure.
func needEverything(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		script, err = filepath.Abs(everythingScript)
	}
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		if os.Getenv("WEIR_TEST_NPM") == "required" {
			t.Fatalf("node or server-everything is missing and WEIR_TEST_NPM=required (npm ci --prefix tools/npm): %v", err)
		}
		t.Skipf("node or server-everything is missing (npm ci --prefix tools/npm installs it): %v", err)
	}
	return node, script
}

// everything is one server-everything process on a fixed port, so that a
// restart comes back where the plugin knows it.
type everything struct {
	t          *testing.T
	node, path string
	addr       string
	cmd        *exec.Cmd
	log        *testutil.Buffer
}

func (e *everything) start() {
	e.t.Helper()
	_, port, _ := net.SplitHostPort(e.addr)
	e.cmd = exec.Command(e.node, e.path, "streamableHttp")
	e.cmd.Env = append(os.Environ(), "PORT="+port)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	testutil.Eventually(e.t, 30*time.Second, func() error {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			return fmt.Errorf("server-everything not listening yet: %v (%s)", err, e.log.String())
		}
		return c.Close()
	})
}

func (e *everything) kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGKILL)
		_ = e.cmd.Wait()
		e.cmd = nil
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServerEverythingOverHTTPWithRestart bridges server-everything in
// over streamable HTTP: its tools are weir tools, a call answers, content
// annotations survive, and after the server is killed and started again
// the next call succeeds on a new session without a plugin restart.
func TestServerEverythingOverHTTPWithRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node")
	}
	node, script := needEverything(t)
	t.Parallel()
	srv := &everything{t: t, node: node, path: script, addr: freeAddr(t), log: &testutil.Buffer{}}
	srv.start()
	t.Cleanup(srv.kill)

	plugins, data := t.TempDir(), t.TempDir()
	if _, err := host.Install(plugins, testutil.Plugin(t, "mcp"), nil); err != nil {
		t.Fatal(err)
	}
	section := fmt.Sprintf(`{"servers":{"everything":{"url":"http://%s/mcp"}},"idempotent":["everything-echo"]}`, srv.addr)
	h, err := host.New(host.Config{PluginsDir: plugins, DataDir: data, PluginConfig: map[string]json.RawMessage{"mcp": json.RawMessage(section)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for _, name := range []string{"mcp.everything-echo", "mcp.everything-get-sum", "mcp.everything-get-annotated-message"} {
		if _, ok := h.LookupTool(name); !ok {
			t.Fatalf("%s is not a weir tool; the tools are %v", name, h.Names())
		}
	}
	call := func(tool, input string) (string, error) {
		res, err := h.Call(context.Background(), host.CallRequest{Tool: tool, Input: json.RawMessage(input), IdempotencyKey: "k-" + input, Attempt: 1})
		if err != nil {
			return "", err
		}
		return string(res.Output), nil
	}
	if out, err := call("mcp.everything-echo", `{"message":"before"}`); err != nil || !strings.Contains(out, "before") {
		t.Fatalf("echo: %s %v", out, err)
	}
	if out, err := call("mcp.everything-get-sum", `{"a":2,"b":3}`); err != nil || !strings.Contains(out, "5") {
		t.Fatalf("get-sum: %s %v", out, err)
	}
	out, err := call("mcp.everything-get-annotated-message", `{"messageType":"error","includeImage":false}`)
	if err != nil || !strings.Contains(out, `"annotations"`) || !strings.Contains(out, `"priority"`) {
		t.Fatalf("get-annotated-message lost its annotations: %s %v", out, err)
	}

	srv.kill()
	// The first call after the kill may go out on the connection the
	// plugin kept alive before it has seen that connection end: the
	// request is written and the answer is EOF, so whether the server
	// read it cannot be known (unknown, honestly). Once that connection
	// is gone, a call cannot be sent at all: not_sent, every time.
	_, err = call("mcp.everything-echo", `{"message":"while down"}`)
	if k := host.KindOf(err); k != host.KindNotSent && k != host.KindUnknown {
		t.Fatalf("the first call after the kill: %v, want kind %s or %s", err, host.KindNotSent, host.KindUnknown)
	}
	_, err = call("mcp.everything-echo", `{"message":"still down"}`)
	if host.KindOf(err) != host.KindNotSent {
		t.Fatalf("a call while the server is down: %v, want kind %s", err, host.KindNotSent)
	}
	srv.start()
	if out, err := call("mcp.everything-echo", `{"message":"after"}`); err != nil || !strings.Contains(out, "after") {
		t.Fatalf("echo after the restart: %s %v", out, err)
	}
	if r := h.Restarts()["mcp"]; r != 0 {
		t.Errorf("the plugin restarted %d times: only the server should have", r)
	}
}
