package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/internal/hooks"
)

// hookDir is a directory holding weir.hcl (src) and the secret files
// named in files, each mode 0600.
func hookDir(t *testing.T, src string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["weir.hcl"] = src
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "weir.hcl")
}

const hookBlocks = `hook "github" {
  owner        = "acme"
  secret_file  = "github.secret"
  signature    = "github"
  event        = "github"
  event_header = "X-GitHub-Event"
  id_header    = "X-GitHub-Delivery"
  key          = "/repository/full_name"
}
hook "stripe" {
  secret_file = "stripe.secret"
  signature   = "stripe"
  tolerance   = "10m"
  event       = "stripe.event"
  id_key      = "/id"
  max_body    = "64KiB"
}
hook "acme" {
  secret_file      = "acme.secret"
  signature        = "hmac-sha256"
  signature_header = "X-Acme-Signature"
  event            = "acme.changed"
  id_header        = "X-Acme-Delivery"
}
`

func TestHookBlocks(t *testing.T) {
	t.Parallel()
	path := hookDir(t, hookBlocks, map[string]string{
		"github.secret": "It's a Secret to Everybody\n", "stripe.secret": "whsec_abc\r\n", "acme.secret": "  spaced secret  ",
	})
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	want := []hooks.Hook{
		{Name: "github", Owner: "acme", Secret: []byte("It's a Secret to Everybody"), SecretFile: filepath.Join(dir, "github.secret"),
			Scheme: hooks.GitHub, Event: "github", EventHeader: "X-GitHub-Event", IDHeader: "X-GitHub-Delivery", Key: "/repository/full_name"},
		{Name: "stripe", Secret: []byte("whsec_abc"), SecretFile: filepath.Join(dir, "stripe.secret"), Scheme: hooks.Stripe,
			Tolerance: 10 * time.Minute, Event: "stripe.event", IDKey: "/id", MaxBody: 64 << 10},
		// Only the trailing newline goes: spaces may be the secret's own.
		{Name: "acme", Secret: []byte("  spaced secret  "), SecretFile: filepath.Join(dir, "acme.secret"), Scheme: hooks.HMACSHA256,
			SignatureHeader: "X-Acme-Signature", Event: "acme.changed", IDHeader: "X-Acme-Delivery"},
	}
	if !reflect.DeepEqual(c.Hooks, want) {
		t.Fatalf("hooks\n%+v\nwant\n%+v", c.Hooks, want)
	}
	if len(c.Warnings) > 0 {
		t.Fatalf("warnings %q", c.Warnings)
	}
	view := string(mustJSON(t, c))
	if strings.Contains(view, "Everybody") || strings.Contains(view, "whsec_abc") {
		t.Fatalf("a hook secret shows in the view: %s", view)
	}
	var v struct {
		Hooks []map[string]any `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(view), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Hooks) != 3 || v.Hooks[1]["tolerance"] != "10m0s" || v.Hooks[1]["max_body"] != "64KiB" || v.Hooks[0]["key"] != "/repository/full_name" {
		t.Fatalf("the view's hooks: %v", v.Hooks)
	}
}

func TestHookRefusals(t *testing.T) {
	t.Parallel()
	block := func(lines ...string) string {
		return "hook \"gh\" {\n  " + strings.Join(lines, "\n  ") + "\n}\n"
	}
	ok := []string{`secret_file = "s"`, `signature = "github"`, `event = "github.push"`, `id_header = "X-GitHub-Delivery"`}
	with := func(extra ...string) string { return block(append(append([]string{}, ok...), extra...)...) }
	without := func(key string) string {
		var ls []string
		for _, l := range ok {
			if !strings.HasPrefix(l, key+" ") {
				ls = append(ls, l)
			}
		}
		return block(ls...)
	}
	tests := []struct {
		name, src string
		secret    string // the secret file's content
		want      []string
	}{
		{"misspelt scheme", strings.Replace(with(), `"github"`, `"githbu"`, 1), "x", []string{"weir.hcl:3", `unknown signature scheme "githbu"`, `did you mean "github"?`}},
		{"misspelt key", with(`event_headr = "X"`), "x", []string{"weir.hcl:6", `"event_headr" is not expected`, `Did you mean "event_header"?`}},
		{"an inline secret", with(`secret = "x"`), "x", []string{"weir.hcl:6", `"secret" is not expected`}},
		{"missing secret file", strings.Replace(with(), `"s"`, `"nope.secret"`, 1), "x", []string{"weir.hcl:2", `hook "gh": secret_file`, "nope.secret", "no such file"}},
		{"empty secret file", with(), "\n", []string{"weir.hcl:2", "secret_file ", "/s is empty"}},
		{"huge secret file", with(), strings.Repeat("k", hooks.MaxSecretBytes+1), []string{"weir.hcl:2", "larger than 4096 bytes"}},
		{"no signature", without("signature"), "x", []string{"weir.hcl:1", `hook "gh" needs signature`}},
		{"no event", without("event"), "x", []string{"weir.hcl:1", `hook "gh" needs event`}},
		{"no secret_file", without("secret_file"), "x", []string{"weir.hcl:1", `hook "gh" needs secret_file`}},
		{"no id", without("id_header"), "x", []string{"weir.hcl:1", "exactly one of id_header"}},
		{"tolerance on github", with(`tolerance = "5m"`), "x", []string{"weir.hcl:6", "carry no timestamp"}},
		{"bad tolerance", with(`tolerance = "soon"`), "x", []string{"weir.hcl:6", "tolerance", `invalid duration "soon"`}},
		{"bad key", with(`key = "repository/full_name"`), "x", []string{"weir.hcl:6", "must start with /"}},
		{"bad event", strings.Replace(with(), `"github.push"`, `"github push"`, 1), "x", []string{"weir.hcl:4", `event name "github push"`}},
		{"max_body over the payload bound", with(`max_body = "1MiB"`), "x", []string{"weir.hcl:6", "max_body 1048576 is outside"}},
		{"bad owner", with(`owner = "a b"`), "x", []string{"weir.hcl:6", `owner "a b"`}},
		{"bad name", strings.Replace(with(), `hook "gh"`, `hook "g/h"`, 1), "x", []string{"weir.hcl:1", `hook name "g/h"`}},
		{"two blocks of one name", with() + with(), "x", []string{"weir.hcl:7", `hook "gh" has two blocks (the other at `, "weir.hcl:1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(hookDir(t, tt.src, map[string]string{"s": tt.secret}))
			if err == nil {
				t.Fatalf("loaded:\n%s", tt.src)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestHookSecretOpenToOthersWarns(t *testing.T) {
	t.Parallel()
	path := hookDir(t, hookBlocks, map[string]string{"github.secret": "a", "stripe.secret": "b", "acme.secret": "c"})
	if err := os.Chmod(filepath.Join(filepath.Dir(path), "stripe.secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `weir.hcl:11: hook "stripe": secret_file `) ||
		!strings.Contains(c.Warnings[0], "(mode 0644, not 0600): whoever reads it can sign deliveries as the hook's provider") {
		t.Fatalf("warnings %q", c.Warnings)
	}
}

// A rotated secret is a new config content and a reload, not a restart;
// so is a new hook.
func TestHookChangesAreReloads(t *testing.T) {
	t.Parallel()
	files := map[string]string{"github.secret": "a", "stripe.secret": "b", "acme.secret": "c"}
	path := hookDir(t, hookBlocks, files)
	before, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "github.secret"), []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	after, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if before.Hash() == after.Hash() {
		t.Error("a rotated hook secret keeps the config's hash")
	}
	if rc := RestartChanges(before, after); len(rc) > 0 {
		t.Errorf("a rotated secret needs a restart: %q", rc)
	}
	if rc := RestartChanges(Default(), after); len(rc) > 0 {
		t.Errorf("new hooks need a restart: %q", rc)
	}
}
