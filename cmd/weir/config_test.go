package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// A real daemon with a config file: the socket's mode, the TCP listener
// with two token owners, the metrics address, and SIGHUP reloading a
// valid candidate and refusing an invalid one.
func TestServeConfigAndSIGHUP(t *testing.T) {
	weir, plugins := binaries(t)
	dir := t.TempDir()
	sock := filepath.Join(testutil.SocketDir(t), "s")
	tcpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfgPath := filepath.Join(dir, "weir.hcl")
	writeConfig := func(workers int, mode string) {
		t.Helper()
		src := fmt.Sprintf(`engine {
  workers = %d
}
socket {
  mode = %q
}
tcp {
  address = %q
  token "alice" {
    secret = "alice-token-0123456789"
  }
  token "bob" {
    secret = "bob-token-0123456789ab"
  }
}
metrics {
  address = %q
}
`, workers, mode, tcpAddr, metricsAddr)
		if err := os.WriteFile(cfgPath, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(2, "0666")

	cmd := exec.Command(weir, "--data", filepath.Join(dir, "data"), "--plugins", plugins, "--socket", sock, "serve", "--config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var logs strings.Builder
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	logged := func(s string) bool {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(logs.String(), s)
	}

	local := client.NewUnix(sock)
	t.Cleanup(local.Close)
	ctx := context.Background()
	status := func() *apitypes.Status {
		t.Helper()
		st, err := local.Health(ctx)
		if err != nil || !st.Open() {
			t.Fatalf("status %+v %v", st, err)
		}
		return st
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		st, err := local.Health(ctx)
		if err == nil && !st.Open() {
			err = fmt.Errorf("admission %s", st.Admission)
		}
		return err
	})
	if st := status(); st.Slots != 2 || st.Config == nil || st.Config.Version != 1 || st.Config.File != cfgPath {
		t.Fatalf("status %+v %+v", st, st.Config)
	}
	socketMode := func() os.FileMode {
		fi, err := os.Stat(sock)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if got := socketMode(); got != 0o666 {
		t.Errorf("socket mode %04o, want 0666", got)
	}

	// Two owners over TCP, told apart by their tokens only.
	tcp := func(token string) *client.Client {
		t.Helper()
		var opts []client.Option
		if token != "" {
			opts = append(opts, client.WithToken(token))
		}
		c, err := client.New("http://"+tcpAddr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	alice, bob := tcp("alice-token-0123456789"), tcp("bob-token-0123456789ab")
	if _, err := local.FlowRegister(ctx, apitypes.SourceFile{Path: "f.star",
		Src: `flow(name = "hello", nodes = [task("greet", tool = "testkit.echo", args = lambda ctx: {"hello": ctx.input})])`}); err != nil {
		t.Fatal(err)
	}
	started, err := alice.RunStart(ctx, apitypes.StartRequest{Flow: "hello", Input: json.RawMessage(`1`)})
	if err != nil || started.Existing {
		t.Fatalf("alice's start over TCP: %+v %v", started, err)
	}
	if v, err := alice.RunGet(ctx, started.RunID); err != nil || v.Owner != "alice" {
		t.Errorf("alice reads her run: %+v %v", v, err)
	}
	var ae *client.Error
	if v, err := bob.RunGet(ctx, started.RunID); !errors.As(err, &ae) || ae.HTTPStatus != 404 || ae.Code != apitypes.CodeNotFound {
		t.Errorf("bob reads alice's run: %+v %v", v, err)
	}
	if st, err := tcp("").Health(ctx); !errors.As(err, &ae) || ae.HTTPStatus != 401 {
		t.Errorf("no token: %+v %v", st, err)
	}
	if v, err := local.RunGet(ctx, started.RunID); err == nil {
		t.Errorf("the local user reads alice's run: %+v", v)
	}

	if text := scrape(t, metricsAddr); !strings.Contains(text, "\nweir_config_version 1\n") || !strings.Contains(text, "weir_store_transaction_duration_seconds_bucket") {
		t.Errorf("metrics before the reload:\n%s", text)
	}

	// SIGHUP with a valid candidate: new limits, new socket mode, version 2.
	writeConfig(3, "0660")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if v := status().Config.Version; v != 2 {
			return fmt.Errorf("config version %d after the reload, want 2", v)
		}
		return nil
	})
	if st := status(); st.Slots != 3 {
		t.Errorf("slots after the reload: %d, want 3", st.Slots)
	}
	if got := socketMode(); got != 0o660 {
		t.Errorf("socket mode after the reload %04o, want 0660", got)
	}
	if text := scrape(t, metricsAddr); !strings.Contains(text, "\nweir_config_version 2\n") {
		t.Errorf("metrics after the reload lack weir_config_version 2")
	}

	// SIGHUP with an invalid candidate: refused and logged, nothing changes.
	if err := os.WriteFile(cfgPath, []byte("engine {\n  workers = -1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if !logged("weir.hcl:2: workers must be at least 1, got -1") {
			return fmt.Errorf("the refusal of workers = -1 is not logged")
		}
		return nil
	})
	if st := status(); st.Slots != 3 || st.Config.Version != 2 {
		t.Errorf("after an invalid candidate: slots %d version %d, want 3 and 2", st.Slots, st.Config.Version)
	}
	if got := socketMode(); got != 0o660 {
		t.Errorf("socket mode after the refused reload %04o", got)
	}

	// SIGTERM drains and exits 0, removing the socket.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("daemon exit: %v\n%s", err, logs.String())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// sharedDaemon is a `weir serve` whose socket everyone may use, run by
// root, with a second OS user (uid 65534) to play another caller.
type sharedDaemon struct {
	t          *testing.T
	weir, sock string
	dir        string // scratch directory everyone may read, for flow files
	me, other  *user.User
	log        *bytes.Buffer
	cmd        *exec.Cmd
	exited     chan error
}

// nobody is the uid of the second user of sharedDaemon.
const nobody = 65534

// newSharedDaemon starts the daemon with cfg (HCL) added to a socket
// block that shares the socket with everyone. It skips, saying why, where
// no second user can be played.
func newSharedDaemon(t *testing.T, cfg string) *sharedDaemon {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another OS user (uid 65534)")
	}
	other, err := user.LookupId("65534")
	if err != nil {
		t.Skipf("no user with uid 65534 to play the second user: %v", err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	weir, plugins := binaries(t)
	// The second user must be able to run the binary and reach the socket.
	if err := os.Chmod(filepath.Dir(weir), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sockDir := testutil.SocketDir(t)
	if err := os.Chmod(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "s")
	pub := filepath.Join(sockDir, "pub")
	if err := os.Mkdir(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "weir.hcl")
	if err := os.WriteFile(cfgPath, []byte("socket {\n  mode = \"0666\"\n}\n"+cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(weir, "--data", filepath.Join(dir, "data"), "--plugins", plugins, "--socket", sock, "serve", "--config", cfgPath, "--grace", "1s")
	var daemonLog bytes.Buffer
	daemon.Stderr = &daemonLog
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	d := &sharedDaemon{t: t, weir: weir, sock: sock, dir: pub, me: me, other: other, log: &daemonLog, cmd: daemon, exited: make(chan error, 1)}
	go func() { d.exited <- daemon.Wait() }()
	t.Cleanup(func() {
		if daemon.ProcessState == nil {
			_ = daemon.Process.Kill()
			<-d.exited
		}
	})
	testutil.Eventually(t, 30*time.Second, func() error {
		if code, out, errb := d.weirAs(0, "status"); code != 0 {
			return fmt.Errorf("status: %d %s %s", code, out, errb)
		}
		return nil
	})
	return d
}

// weirAs runs the CLI as the given uid and returns its exit code and
// output.
func (d *sharedDaemon) weirAs(uid int, args ...string) (int, string, string) {
	d.t.Helper()
	c := exec.Command(d.weir, append([]string{"--socket", d.sock, "--data", filepath.Dir(d.sock)}, args...)...)
	c.Env = []string{"HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatal(err)
	}
	return code, strings.TrimSpace(out.String()), errb.String()
}

// file writes a file everyone can read in the scratch directory.
func (d *sharedDaemon) file(name, content string) string {
	d.t.Helper()
	p := filepath.Join(d.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
	return p
}

// stop ends the daemon with SIGTERM and checks it exits cleanly.
func (d *sharedDaemon) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatal(err)
	}
	if err := <-d.exited; err != nil {
		d.t.Errorf("daemon exit: %v\n%s", err, d.log.String())
	}
}

// Two OS users on one daemon, whose socket the config shares with
// everyone: the kernel tells the daemon who each is, and neither can see,
// cancel or read the events of the other's runs; only the daemon's own
// user may reload it.
func TestTwoOSUsersOnOneSocket(t *testing.T) {
	d := newSharedDaemon(t, "")
	weirAs, me, other := d.weirAs, d.me, d.other
	flows := d.file("f.star", `flow(name = "nap", nodes = [task("s", tool = "testkit.sleep", args = {"ms": 60000})])`)
	if code, out, errb := weirAs(0, "flow", "register", flows); code != 0 {
		t.Fatalf("register: %d %s %s", code, out, errb)
	}
	if code, out, _ := weirAs(nobody, "status"); code != 0 || !strings.Contains(out, "you are:         "+other.Username+" (unix socket)") {
		t.Fatalf("the second user's status: %d %s", code, out)
	}

	code, mine, errb := weirAs(0, "run", "start", "nap", "--request-id", "same")
	if code != 0 {
		t.Fatalf("start as %s: %s", me.Username, errb)
	}
	code, theirs, errb := weirAs(nobody, "run", "start", "nap", "--request-id", "same")
	if code != 0 || theirs == mine {
		t.Fatalf("start as %s with the same request id: %d %q (mine %q) %s", other.Username, code, theirs, mine, errb)
	}
	for _, c := range []struct {
		uid  int
		name string
		run  string
	}{{nobody, other.Username, mine}, {0, me.Username, theirs}} {
		for _, args := range [][]string{{"run", "get", c.run}, {"run", "events", c.run}, {"run", "cancel", c.run}} {
			code, out, errb := weirAs(c.uid, args...)
			if code != exitFailed || !strings.Contains(errb, "E_NOT_FOUND: no run "+c.run) {
				t.Errorf("%s: weir %s: exit %d %s %s", c.name, strings.Join(args, " "), code, out, errb)
			}
		}
		if _, out, _ := weirAs(c.uid, "run", "ls"); strings.Contains(out, c.run) {
			t.Errorf("%s lists the other's run: %s", c.name, out)
		}
	}
	// Each still owns and can cancel their own run: the foreign cancels
	// changed nothing.
	for _, c := range []struct {
		uid int
		run string
	}{{0, mine}, {nobody, theirs}} {
		if code, out, errb := weirAs(c.uid, "run", "get", "--json", c.run); code != 0 || strings.Contains(out, "cancel") {
			t.Errorf("uid %d reads its run: %d %s %s", c.uid, code, out, errb)
		}
		if code, out, _ := weirAs(c.uid, "run", "cancel", c.run); code != 0 || out != "requested" {
			t.Errorf("uid %d cancels its run: %d %s", c.uid, code, out)
		}
	}
	if code, _, errb := weirAs(nobody, "admin", "reload"); code != exitFailed || !strings.Contains(errb, "E_FORBIDDEN") {
		t.Errorf("the second user reloads the daemon: %d %s", code, errb)
	}
	if code, _, errb := weirAs(nobody, "admin", "audit"); code != exitFailed || !strings.Contains(errb, "E_FORBIDDEN") {
		t.Errorf("the second user reads the audit stream: %d %s", code, errb)
	}
	// The daemon's user sees every foreign attempt in the audit stream.
	_, audit, _ := weirAs(0, "admin", "audit")
	for _, want := range []string{other.Username + " get of run " + mine, other.Username + " cancel of run " + mine, me.Username + " get of run " + theirs} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit stream lacks %q:\n%s", want, audit)
		}
	}
	if code, out, errb := weirAs(0, "admin", "reload"); code != 0 || !strings.Contains(out, "unchanged") {
		t.Errorf("the daemon's user reloads: %d %s %s", code, out, errb)
	}
	d.stop()
}

// weir status says why admission is closed and what the operator must do.
func TestPrintStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		st   apitypes.Status
		want []string
	}{
		{"storage failure", apitypes.Status{Admission: apitypes.CodeStorage, Reason: "write 000003.vlog: no space left on device", Queued: 3, Held: 1, Slots: 8},
			[]string{"admission:       E_STORAGE (the store failed; admission stays closed until the daemon is restarted)\n                 write 000003.vlog: no space left on device\n",
				"queued tasks:    3\n", "held tasks:      1\n", "slots:           8\n"}},
		{"draining", apitypes.Status{Admission: apitypes.CodeDraining, Reason: "the engine is stopping", Queued: 5, Held: 2, Slots: 64,
			Config: &apitypes.ConfigInfo{Version: 3, File: "/etc/weir.hcl", Pinned: []string{"workers", "grace"}}, Caller: &apitypes.Caller{Owner: "alice"}},
			[]string{"admission:       E_DRAINING (the engine is stopping)\n", "queued tasks:    5\n", "held tasks:      2\n",
				"config version:  3 (/etc/weir.hcl)\n", "pinned by flags: workers, grace\n", "you are:         alice (bearer token)\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			printStatus(&b, &tt.st)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("status output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// The plugin blocks of docs/operators.md's example config are ones
// `weir config check` accepts with the first-party plugins installed: a
// plugin's section is checked against the schema its manifest declares,
// so a key the plugin does not read fails here. (The rest of the example
// names groups and token files of a real host.)
func TestOperatorsExamplePluginBlocksCheck(t *testing.T) {
	_, plugins := binaries(t)
	doc, err := os.ReadFile("../../docs/operators.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "### An example")
	if !ok {
		t.Fatal(`docs/operators.md has no "### An example" section`)
	}
	_, block, ok := strings.Cut(after, "```hcl\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no hcl block in docs/operators.md's example section")
	}
	// Each plugin block runs from its `plugin "` line to the next line
	// that closes a top-level block.
	var blocks []string
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], `plugin "`) {
			continue
		}
		j := i
		for j < len(lines) && lines[j] != "}" {
			j++
		}
		blocks = append(blocks, strings.Join(lines[i:j+1], "\n"))
		i = j
	}
	src := strings.Join(blocks, "\n")
	for _, p := range []string{`plugin "llm"`, `plugin "http"`} {
		if !strings.Contains(src, p) {
			t.Fatalf("the example has no %s block to check; plugin blocks found:\n%s", p, src)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "weir.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": dir, "WEIR_PLUGINS": plugins}
	// The llm and mcp blocks' env lists name variables that must be set
	// for the daemon.
	t.Setenv("ANTHROPIC_API_KEY", "k")
	t.Setenv("FILES_KEY", "k")
	code, out, errb, _ := run(t, env, "config", "check", path)
	if code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("config check of the docs' plugin blocks: exit %d\n%s%s\n%s", code, out, errb, src)
	}
	// The mistake the docs once made is refused, at its line.
	wrong := filepath.Join(dir, "wrong.hcl")
	if err := os.WriteFile(wrong, []byte("plugin \"http\" {\n  allow_hosts = [\"api.example.com\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errb, _ := run(t, env, "config", "check", wrong); code == 0 || !strings.Contains(errb, "wrong.hcl:2") {
		t.Fatalf("config check of allow_hosts: exit %d\n%s%s", code, out, errb)
	}
}

// A token secret_file others can read is valid, but `weir config check`
// warns of it on stderr and the daemon's load (at start and at each
// reload) returns the warning among the notes it logs.
func TestSecretFileOpenToOthersWarned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok, path := filepath.Join(dir, "tok"), filepath.Join(dir, "weir.hcl")
	if err := os.WriteFile(tok, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("tcp {\n  token \"bob\" {\n    secret_file = \"tok\"\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func() (int, string, string, []string) {
		t.Helper()
		code, out, errb, _ := run(t, map[string]string{"HOME": dir}, "config", "check", path)
		_, _, notes, err := (&configSource{file: path, pluginsDir: filepath.Join(dir, "plugins")}).load()
		if err != nil {
			t.Fatal(err)
		}
		return code, out, errb, notes
	}
	if code, out, errb, notes := check(); code != 0 || !strings.Contains(out, "valid") || errb != "" || len(notes) != 0 {
		t.Fatalf("mode 0600: exit %d, stdout %q, stderr %q, notes %q", code, out, errb, notes)
	}
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "is open to others (mode 0644, not 0600)"
	code, out, errb, notes := check()
	if code != 0 || !strings.Contains(out, "valid") || !strings.HasPrefix(errb, "warning: "+path+":3: token of \"bob\": secret_file "+tok) || !strings.Contains(errb, want) {
		t.Fatalf("mode 0644: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], want) {
		t.Fatalf("the daemon's load notes %q", notes)
	}
}
