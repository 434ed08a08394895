package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/memstore"
)

func TestLoadFull(t *testing.T) {
	t.Parallel()
	c, err := Load("testdata/full.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File:        "testdata/full.hcl",
		LogLevel:    "debug",
		LogFormat:   "json",
		MemoryLimit: 2 << 30,
		Sandbox:     Sandbox{Workers: 3, SpareWorkers: 1, Memory: 256 << 20, Timeout: 10 * time.Second},
		Engine: Engine{Workers: 8, SpareWorkers: 2, MaxQueued: 500, QueueTimeout: 2 * time.Minute, BudgetInFlight: 1000, RunBudget: 50,
			LeaseTimeout: 20 * time.Second, MaxAttempts: 3, RetryBase: 200 * time.Millisecond, RetryMax: time.Minute},
		DrainGrace: 45 * time.Second,
		PluginPing: PluginPing{Interval: 10 * time.Second, Timeout: 4 * time.Second},
		Socket:     Socket{Mode: 0o660, Group: "0", GID: 0},
		TCP: &TCP{Address: "127.0.0.1:7411", Tokens: []Token{
			{Owner: "alice", Secret: "alice-0123456789abcdef", Where: "testdata/full.hcl:37"},
			{Owner: "ci-bot", Secret: "ci-0123456789abcdef0123", Where: "testdata/full.hcl:40"},
		}},
		MetricsAddress:  "127.0.0.1:9411",
		RetentionMaxAge: 30 * 24 * time.Hour,
		EventRetention:  engine.DefaultEventRetention,
		DiskMinFree:     1 << 30,
		HTTP: api.HTTPLimits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 45 * time.Second,
			IdleTimeout: 90 * time.Second, MaxConns: 256, MaxConnsPerPeer: 16,
			MaxConnsPerIP: api.DefaultMaxConnsPerIP, MaxRequestsPerOwner: api.DefaultMaxRequestsPerOwner, MaxStreamsPerOwner: api.DefaultMaxStreamsPerOwner},
		Plugins: map[string]json.RawMessage{
			"http": json.RawMessage(`{"allow_hosts":["api.example.com","example.org"],"max_bytes":1048576,"timeout":"10s"}`),
		},
		Telemetry: Telemetry{Endpoint: "collector.example:4317", Protocol: "grpc", Insecure: true, Headers: map[string]string{"X-Team": "weir"},
			Sample: 0.5, ServiceName: "weir-full", CaptureContent: true, headerValues: map[string]string{"X-Team": "weir"}},
	}
	want.pluginWhere = c.pluginWhere // positions: TestPluginHostKeys
	// A checkout's modes are the umask's (git keeps none but the
	// executable bit): the secrets may be open to others here, which
	// TestSecretOpenToOthersWarns covers; whatever is warned names why.
	for _, w := range c.Warnings {
		if !strings.Contains(w, "open to others") {
			t.Errorf("warning %q", w)
		}
	}
	want.Warnings, want.inlineSecret = c.Warnings, true // alice's secret is in the file
	if !reflect.DeepEqual(c, want) {
		gb, _ := json.MarshalIndent(c, "", " ")
		wb, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("got\n%s\nwant\n%s\ntokens %+v", gb, wb, c.TCP.Tokens)
	}
	ec := c.EngineConfig(7)
	if ec.Workers != 8 || ec.MaxQueued != 500 || ec.QueueTimeout != 2*time.Minute || ec.MaxBudgetInFlight != 1000 ||
		ec.DefaultRunBudget != 50 || ec.LeaseTimeout != 20*time.Second || ec.MaxAttempts != 3 ||
		ec.RetryBase != 200*time.Millisecond || ec.RetryMax != time.Minute || ec.ConfigVersion != 7 || ec.Retention != 30*24*time.Hour ||
		ec.MinFreeBytes != 1<<30 {
		t.Errorf("EngineConfig = %+v", ec)
	}
	if got := c.Tokens(); len(got) != 2 || got["alice-0123456789abcdef"] != "alice" || got["ci-0123456789abcdef0123"] != "ci-bot" {
		t.Errorf("Tokens() = %v", got)
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("# nothing set\n"), "empty.hcl")
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	d.File = "empty.hcl"
	if !reflect.DeepEqual(c, d) {
		t.Errorf("got %+v, want %+v", c, d)
	}
	if c.Socket.Mode != 0o600 || c.TCP != nil || c.MetricsAddress != "" {
		t.Errorf("defaults are not owner-only socket, no tcp, no metrics: %+v", c)
	}
	if c.Hash() != Default().Hash() {
		t.Error("the file name changes the hash")
	}
}

func TestQueueTimeoutNone(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("engine {\n  queue_timeout = \"none\"\n}\n"), "q.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Engine.QueueTimeout >= 0 {
		t.Errorf("queue_timeout none = %v, want negative (no deadline)", c.Engine.QueueTimeout)
	}
}

// Every refusal names the file and line of the offending construct.
func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string // substrings of the error, in any order
	}{
		{"unknown attribute", "log_level = \"info\"\nworkers = 4\n", []string{"c.hcl:2", `An argument named "workers" is not expected here`}},
		{"unknown block", "engine {\n}\nlimits {\n  x = 1\n}\n", []string{"c.hcl:3", `Blocks of type "limits" are not expected here`}},
		{"unknown attribute in block", "engine {\n  worker = 4\n}\n", []string{"c.hcl:2", `"worker" is not expected`, `Did you mean "workers"?`}},
		{"duplicate block", "engine {\n}\nengine {\n}\n", []string{"c.hcl:3", "Duplicate engine block"}},
		{"syntax", "engine {\n  workers = \n}\n", []string{"c.hcl:2"}},
		{"wrong type", "engine {\n  workers = \"many\"\n}\n", []string{"c.hcl:2", "workers must be a number"}},
		{"zero workers", "engine {\n  workers = 0\n}\n", []string{"c.hcl:2", "workers must be at least 1, got 0"}},
		{"fractional", "engine {\n  max_queued = 1.5\n}\n", []string{"c.hcl:2", "max_queued must be a whole number"}},
		{"huge", "engine {\n  run_budget = 1e300\n}\n", []string{"c.hcl:2", "run_budget is too large: 1e+300"}},
		{"negative budget", "engine {\n  budget_in_flight = -1\n}\n", []string{"c.hcl:2", "budget_in_flight must be at least 0"}},
		{"bad duration", "engine {\n\n  lease_timeout = \"soon\"\n}\n", []string{"c.hcl:3", "lease_timeout", `invalid duration "soon"`}},
		{"negative duration", "engine {\n  retry_max = \"-5s\"\n}\n", []string{"c.hcl:2", "retry_max must be positive"}},
		{"retry order", "engine {\n  retry_base = \"1m\"\n  retry_max = \"1s\"\n}\n", []string{"c.hcl:2", "retry_base (1m0s) is longer than retry_max (1s)"}},
		{"variables", "log_level = env.LEVEL\n", []string{"c.hcl:1", "Variables not allowed"}},
		{"functions", "log_level = lower(\"INFO\")\n", []string{"c.hcl:1", "Function calls not allowed"}},
		{"log level", "log_level = \"loud\"\n", []string{"c.hcl:1", `log_level must be one of trace, debug, info, warn, error; got "loud"`}},
		{"socket mode not octal", "socket {\n  mode = \"rw\"\n}\n", []string{"c.hcl:2", "socket mode must be octal"}},
		{"socket mode number", "socket {\n  mode = 660\n}\n", []string{"c.hcl:2", "socket mode must be octal"}},
		{"socket mode locks out owner", "socket {\n  mode = \"0060\"\n}\n", []string{"c.hcl:2", "must let the daemon's own user read and write"}},
		{"socket mode exec", "socket {\n  mode = \"0700\"\n}\n", []string{"c.hcl:2", "execute bits"}},
		{"socket group unknown", "socket {\n  group = \"no-such-group-weir\"\n}\n", []string{"c.hcl:2", `socket group "no-such-group-weir"`}},
		{"tcp without tokens", "tcp {\n  address = \"127.0.0.1:1\"\n}\n", []string{"c.hcl:1", "declares no token"}},
		{"tcp bad address", "tcp {\n  address = \"nowhere\"\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n", []string{"c.hcl:2", `tcp address "nowhere"`}},
		{"tcp remote without consent", "tcp {\n  address = \"0.0.0.0:7411\"\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n", []string{"c.hcl:2", "not loopback", "allow_remote"}},
		{"tcp all interfaces without consent", "tcp {\n  address = \":7411\"\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n", []string{"c.hcl:2", "not loopback"}},
		{"token short", "tcp {\n  token \"a\" {\n    secret = \"short\"\n  }\n}\n", []string{"c.hcl:3", "token of \"a\" is 5 characters; a token needs at least 16"}},
		{"token both", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n    secret_file = \"x\"\n  }\n}\n", []string{"c.hcl:2", "exactly one of secret or secret_file"}},
		{"token neither", "tcp {\n  token \"a\" {\n  }\n}\n", []string{"c.hcl:2", "exactly one of secret or secret_file"}},
		{"token missing file", "tcp {\n  token \"a\" {\n    secret_file = \"/no/such/token\"\n  }\n}\n", []string{"c.hcl:3", "no such file"}},
		{"token bad owner", "tcp {\n  token \"a b\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n", []string{"c.hcl:2", `token owner "a b"`}},
		{"token shared secret", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n  token \"b\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n", []string{"c.hcl:5", `token of "b" has the same secret as the token at c.hcl:2`}},
		{"console without tcp", "console {\n}\n", []string{"c.hcl:1", "the console block needs a tcp block"}},
		{"console remote without consent", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\nconsole {\n  address = \"0.0.0.0:7412\"\n}\n", []string{"c.hcl:7", "console address \"0.0.0.0:7412\" is not loopback", "allow_remote"}},
		{"console bad address", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\nconsole {\n  address = \"nowhere\"\n}\n", []string{"c.hcl:7", `console address "nowhere"`}},
		{"console unknown key", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\nconsole {\n  adress = \"127.0.0.1:1\"\n}\n", []string{"c.hcl:7", `"adress" is not expected`}},
		{"token no label", "tcp {\n  token {\n    secret = \"0123456789abcdef\"\n  }\n}\n", []string{"c.hcl:2", "Missing owner for token"}},
		{"metrics needs address", "metrics {\n}\n", []string{"c.hcl:1", "the metrics block needs an address"}},
		{"metrics bad address", "metrics {\n  address = \"9411\"\n}\n", []string{"c.hcl:2", `metrics address "9411"`}},
		{"retention empty", "retention {\n}\n", []string{"c.hcl:1", "the retention block needs max_age"}},
		{"retention zero", "retention {\n  max_age = \"0s\"\n}\n", []string{"c.hcl:2", "max_age"}},
		{"disk watermark too low", "disk {\n  min_free = \"1MiB\"\n}\n", []string{"c.hcl:2", "min_free \"1MiB\" is below the minimum of 32MiB"}},
		{"disk watermark not a size", "disk {\n  min_free = \"lots\"\n}\n", []string{"c.hcl:2", "not a size"}},
		{"http limits", "http {\n  read_timeout = \"0s\"\n  max_conns = 0\n}\n", []string{"c.hcl:2", "read_timeout must be positive", "c.hcl:3", "max_conns must be at least 1"}},
		{"drain bad", "drain {\n  grace = \"forever\"\n}\n", []string{"c.hcl:2", "grace"}},
		{"memory limit not a size", "memory_limit = \"lots\"\n", []string{"c.hcl:1", "memory_limit", `"lots" is not a size`}},
		{"memory limit too small", "memory_limit = \"1MiB\"\n", []string{"c.hcl:1", `memory_limit "1MiB" is below the minimum of 64MiB`}},
		{"memory limit a number", "memory_limit = 5\n", []string{"c.hcl:1", "memory_limit"}},
		{"sandbox memory too small", "sandbox {\n  memory = \"8MiB\"\n}\n", []string{"c.hcl:2", `memory "8MiB" is below the minimum of 64MiB`}},
		{"sandbox no workers", "sandbox {\n  workers = 0\n}\n", []string{"c.hcl:2", "workers must be at least 1"}},
		{"sandbox timeout", "sandbox {\n  timeout = \"0s\"\n}\n", []string{"c.hcl:2", "timeout"}},
		{"plugin bad name", "plugin \"HTTP\" {\n}\n", []string{"c.hcl:1", `plugin "HTTP": not a plugin name`}},
		{"plugin twice", "plugin \"http\" {\n}\nplugin \"http\" {\n}\n", []string{"c.hcl:3", `plugin "http" has two sections`}},
		{"plugin nested block", "plugin \"http\" {\n  limits {\n  }\n}\n", []string{"c.hcl:2", "Unexpected \"limits\" block"}},
		{"plugin env not a list", "plugin \"llm\" {\n  env = \"HOME\"\n}\n", []string{"c.hcl:2", `plugin "llm": env must be a list`}},
		{"plugin env bad name", "plugin \"llm\" {\n  env = [\"A-B\"]\n}\n", []string{"c.hcl:2", `"A-B" is not a variable name`}},
		{"plugin env twice", "plugin \"llm\" {\n  env = [\"HOME\", \"HOME\"]\n}\n", []string{"c.hcl:2", `env lists "HOME" twice`}},
		{"plugin env unset", "plugin \"llm\" {\n\n  env = [\"WEIR_TEST_UNSET_VARIABLE\"]\n}\n", []string{"c.hcl:3", "env lists WEIR_TEST_UNSET_VARIABLE, which is not set"}},
		{"plugin memory not a size", "plugin \"llm\" {\n  memory_max = \"lots\"\n}\n", []string{"c.hcl:2", `memory_max: "lots" is not a size`}},
		{"plugin memory bad unit", "plugin \"llm\" {\n  memory_max = \"5XB\"\n}\n", []string{"c.hcl:2", `unknown unit "XB"`}},
		{"plugin memory number", "plugin \"llm\" {\n  memory_max = 512\n}\n", []string{"c.hcl:2", "below the minimum"}},
		{"plugin memory too small", "plugin \"llm\" {\n  memory_max = \"1MiB\"\n}\n", []string{"c.hcl:2", "below the minimum of 32MiB"}},
		{"plugin memory huge", "plugin \"llm\" {\n  memory_max = \"99999999999TiB\"\n}\n", []string{"c.hcl:2", "too large"}},
		{"store without url", "store {\n}\n", []string{"c.hcl:1", "the store block needs a url"}},
		{"store not postgres", "store {\n  url = \"mysql://weir:s3cret@db/weir\"\n}\n", []string{"c.hcl:2", `scheme is "mysql"`}},
		{"store no host", "store {\n  url = \"postgres:///weir\"\n}\n", []string{"c.hcl:2", "names no host"}},
		{"store unknown key", "store {\n  url = \"postgres://db/weir\"\n  pool = 4\n}\n", []string{"c.hcl:3", `"pool" is not expected`}},
		{"schema and value problems at once", "engine {\n  workers = 0\n  lease = \"1s\"\n}\nlog_level = 3\n", []string{"c.hcl:2: workers must be at least 1", `c.hcl:3: Unsupported argument: An argument named "lease"`, "c.hcl:5"}},
		{"telemetry without endpoint", "telemetry {\n  sample = 0.5\n}\n", []string{"c.hcl:1", "the telemetry block needs an otlp_endpoint"}},
		{"telemetry protocol", "telemetry {\n  otlp_endpoint = \"http://127.0.0.1:4318\"\n  protocol = \"thrift\"\n}\n", []string{"c.hcl:3", `protocol must be "http" or "grpc", got "thrift"`}},
		{"telemetry scheme", "telemetry {\n  otlp_endpoint = \"udp://127.0.0.1:4318\"\n}\n", []string{"c.hcl:2", `scheme "udp"`}},
		{"telemetry not an address", "telemetry {\n  otlp_endpoint = \"collector\"\n}\n", []string{"c.hcl:2", "neither a URL nor host:port"}},
		{"telemetry credentials in URL", "telemetry {\n  otlp_endpoint = \"https://u:s3cret@collector:4318\"\n}\n", []string{"c.hcl:2", "holds credentials"}},
		{"telemetry sample", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  sample = 1.5\n}\n", []string{"c.hcl:3", "sample must be from 0 to 1, got 1.5"}},
		{"telemetry sample a string", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  sample = \"all\"\n}\n", []string{"c.hcl:3", "sample must be a number"}},
		{"telemetry insecure https", "telemetry {\n  otlp_endpoint = \"https://collector:4318\"\n  insecure = true\n}\n", []string{"c.hcl:3", "contradicts the https:// endpoint"}},
		{"telemetry header env unset", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  headers = { Authorization = \"env:WEIR_TEST_UNSET_VARIABLE\" }\n}\n", []string{"c.hcl:3", "Authorization names WEIR_TEST_UNSET_VARIABLE, which is not set"}},
		{"telemetry header name", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  headers = { \"a b\" = \"s3cret\" }\n}\n", []string{"c.hcl:3", `"a b" is not a header name`}},
		{"telemetry header line break", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  headers = { X = \"s3cret\\nInjected: 1\" }\n}\n", []string{"c.hcl:3", "X's value holds a line break"}},
		{"telemetry headers not a map", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  headers = [\"X\"]\n}\n", []string{"c.hcl:3", "headers must be a map"}},
		{"telemetry service name", "telemetry {\n  otlp_endpoint = \"collector:4317\"\n  service_name = \"\"\n}\n", []string{"c.hcl:3", "service_name must be 1 to 255 bytes"}},
		{"several problems at once", "log_level = \"loud\"\nengine {\n  workers = 0\n}\n", []string{"c.hcl:1", "c.hcl:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse([]byte(tt.src), "c.hcl")
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %T %v is not an *Error with problems", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q quotes a password", err)
			}
		})
	}
}

// TestStoreURL: the store block's URL is kept for the daemon, shown
// without its password, and a change of store needs a restart.
func TestStoreURL(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("store {\n  url = \"postgres://weir:s3cret@db:5432/weir?sslmode=require\"\n}\n"), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.URL != "postgres://weir:s3cret@db:5432/weir?sslmode=require" {
		t.Fatalf("store URL %q", c.Store.URL)
	}
	b := string(mustJSON(t, c))
	if strings.Contains(b, "s3cret") || !strings.Contains(b, `"store":{"url":"postgres://weir:xxxxx@db:5432/weir?sslmode=require"}`) {
		t.Fatalf("JSON %s: want the store URL without its password", b)
	}
	if b := string(mustJSON(t, Default())); strings.Contains(b, `"store"`) {
		t.Fatalf("JSON of the default config names a store: %s", b)
	}
	got := RestartChanges(Default(), c)
	if want := []string{"store (embedded -> postgres://weir:xxxxx@db:5432/weir?sslmode=require)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("restart changes %q, want %q", got, want)
	}
}

// TestStoreShared: store { shared = true } makes the daemon one of a
// fleet, is shown, needs a URL, and a change of it needs a restart.
func TestStoreShared(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("store {\n  url = \"postgres://weir@db/weir\"\n  shared = true\n}\n"), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Store.Shared {
		t.Fatal("store.shared not kept")
	}
	if b := string(mustJSON(t, c)); !strings.Contains(b, `"store":{"url":"postgres://weir@db/weir","shared":true}`) {
		t.Fatalf("JSON %s: want the store shared", b)
	}
	unshared := *c
	unshared.Store.Shared = false
	if got, want := RestartChanges(&unshared, c), []string{"store shared (false -> true)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("restart changes %q, want %q", got, want)
	}
	if _, err := Parse([]byte("store {\n  shared = true\n}\n"), "c.hcl"); err == nil || !strings.Contains(err.Error(), "needs a url") {
		t.Fatalf("a shared store without a URL: %v, want the url asked for", err)
	}
	if _, err := Parse([]byte("store {\n  url = \"postgres://weir@db/weir\"\n  shared = \"yes\"\n}\n"), "c.hcl"); err == nil {
		t.Fatal("shared = \"yes\" accepted, want a bool")
	}
}

// TestPluginHostKeys: env and memory_max are the host's, stripped from
// the section the plugin sees; values of the variables are never kept.
func TestPluginHostKeys(t *testing.T) {
	t.Setenv("WEIR_TEST_PLUGIN_KEY", "s3cret-value")
	c, err := Parse([]byte("plugin \"llm\" {\n  env = [\"WEIR_TEST_PLUGIN_KEY\", \"HOME\"]\n  memory_max = \"512MiB\"\n  models = { small = { max_tokens = 5 } }\n}\nplugin \"fs\" {\n  root = \"/x\"\n}\n"), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(c.Plugins["llm"]); got != `{"models":{"small":{"max_tokens":5}}}` {
		t.Errorf("llm section = %s", got)
	}
	want := PluginHost{Env: []string{"HOME", "WEIR_TEST_PLUGIN_KEY"}, MemoryMax: 512 << 20}
	if got := c.PluginHost["llm"]; !reflect.DeepEqual(got, want) {
		t.Errorf("llm host keys = %+v, want %+v", got, want)
	}
	if _, ok := c.PluginHost["fs"]; ok {
		t.Errorf("fs has host keys: %+v", c.PluginHost["fs"])
	}
	if w := c.PluginWhere("llm", "models"); w != "c.hcl:4" {
		t.Errorf("where of models = %q", w)
	}
	if w := c.PluginWhere("llm", "nope"); w != "c.hcl:1" {
		t.Errorf("where of the block = %q", w)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || strings.Contains(c.Hash(), "s3cret") {
		t.Errorf("a variable's value leaked into the config: %s", b)
	}
	// Changing a host key needs a restart like changing the section.
	c2, err := Parse([]byte("plugin \"llm\" {\n  env = [\"WEIR_TEST_PLUGIN_KEY\", \"HOME\"]\n  memory_max = \"1GiB\"\n  models = { small = { max_tokens = 5 } }\n}\nplugin \"fs\" {\n  root = \"/x\"\n}\n"), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if got := RestartChanges(c, c2); !reflect.DeepEqual(got, []string{`plugin "llm" section`}) {
		t.Errorf("restart changes = %q", got)
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "1000": 1000, "3 MB": 3e6, "1KiB": 1024} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1MiB", "1.5GiB", "12 parsecs", "MiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestRemoteTCPWithConsent(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("tcp {\n  address = \"0.0.0.0:7411\"\n  allow_remote = true\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n"), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.TCP.Address != "0.0.0.0:7411" || !c.TCP.AllowRemote {
		t.Errorf("tcp = %+v", c.TCP)
	}
}

// TestTCPTLS: a tls block names its PEM files (relative to the config
// file), lets the listener bind beyond loopback without allow_remote, and
// refuses, at its line, a missing file, a key of another certificate or
// a block without both files. Switching TLS on or off needs a restart;
// another certificate is a reload.
func TestTCPTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := testutil.NewCert(t, dir, "a"), testutil.NewCert(t, dir, "b")
	block := func(addr, certFile, keyFile string) string {
		return "tcp {\n  address = \"" + addr + "\"\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n  tls {\n    cert_file = \"" + certFile + "\"\n    key_file = \"" + keyFile + "\"\n  }\n}\n"
	}
	path := filepath.Join(dir, "c.hcl")
	c, err := Parse([]byte(block("0.0.0.0:7411", "a.pem", "a-key.pem")), path)
	if err != nil {
		t.Fatal(err)
	}
	if c.TCP.TLS == nil || c.TCP.TLS.CertFile != a.CertFile || c.TCP.TLS.KeyFile != a.KeyFile || c.TCP.AllowRemote {
		t.Fatalf("tcp %+v tls %+v", c.TCP, c.TCP.TLS)
	}
	for _, tt := range []struct{ name, src, want string }{
		{"missing cert", block("127.0.0.1:1", "none.pem", "a-key.pem"), "c.hcl:6: tcp tls: loading"},
		{"other key", block("127.0.0.1:1", "a.pem", "b-key.pem"), "c.hcl:6: tcp tls: loading"},
		{"no key file", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n  tls {\n    cert_file = \"a.pem\"\n  }\n}\n", "c.hcl:5: the tcp tls block needs key_file"},
		{"unknown key", "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n  tls {\n    cert = \"a.pem\"\n  }\n}\n", `c.hcl:6: Unsupported argument: An argument named "cert"`},
	} {
		if _, err := Parse([]byte(tt.src), path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	plain, err := Parse([]byte("tcp {\n  address = \"0.0.0.0:7411\"\n  allow_remote = true\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n"), path)
	if err != nil {
		t.Fatal(err)
	}
	if got := RestartChanges(plain, c); !reflect.DeepEqual(got, []string{"tcp tls (off -> on)"}) {
		t.Errorf("tls on: %q", got)
	}
	other, err := Parse([]byte(block("0.0.0.0:7411", b.CertFile, b.KeyFile)), path)
	if err != nil {
		t.Fatal(err)
	}
	if got := RestartChanges(c, other); len(got) != 0 {
		t.Errorf("another certificate: %q, want a reload", got)
	}
}

// TestConsoleBlock: the console is off without its block, binds loopback
// by default, and binds elsewhere only with allow_remote.
func TestConsoleBlock(t *testing.T) {
	t.Parallel()
	const tcp = "tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n"
	c, err := Parse([]byte(tcp), "c.hcl")
	if err != nil || c.Console != nil {
		t.Fatalf("no console block: console = %+v, err %v", c.Console, err)
	}
	c, err = Parse([]byte(tcp+"console {\n}\n"), "c.hcl")
	if err != nil || c.Console == nil || c.Console.Address != DefaultConsoleAddress || c.Console.AllowRemote {
		t.Fatalf("empty console block: console = %+v, err %v", c.Console, err)
	}
	c, err = Parse([]byte(tcp+"console {\n  address = \"0.0.0.0:7412\"\n  allow_remote = true\n}\n"), "c.hcl")
	if err != nil || c.Console.Address != "0.0.0.0:7412" || !c.Console.AllowRemote {
		t.Fatalf("remote console with consent: console = %+v, err %v", c.Console, err)
	}
	if ch := RestartChanges(Default(), c); len(ch) == 0 || !strings.Contains(strings.Join(ch, ","), "console address (off -> 0.0.0.0:7412)") {
		t.Errorf("restart changes = %q", ch)
	}
}

func TestLoadMissingAndOversized(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "none.hcl")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

func TestSecretFileRelativeToConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte("  0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "weir.hcl")
	if err := os.WriteFile(path, []byte("tcp {\n  token \"bob\" {\n    secret_file = \"tok\"\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tokens(); got["0123456789abcdef0123"] != "bob" {
		t.Errorf("tokens %v: the file is read relative to the config and trimmed", got)
	}
}

func TestHash(t *testing.T) {
	t.Parallel()
	base := "engine {\n  workers = 4\n}\ntcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n"
	parse := func(src, name string) *Config {
		t.Helper()
		c, err := Parse([]byte(src), name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := parse(base, "a.hcl")
	if a.Hash() != parse("# a comment changes nothing\n"+base, "b.hcl").Hash() {
		t.Error("comments or the file name change the hash")
	}
	if a.Hash() == parse(strings.Replace(base, "workers = 4", "workers = 5", 1), "a.hcl").Hash() {
		t.Error("a changed limit keeps the hash")
	}
	if a.Hash() == parse(strings.Replace(base, "0123456789abcdef", "0123456789abcdeg", 1), "a.hcl").Hash() {
		t.Error("a changed token secret keeps the hash")
	}
	if strings.Contains(string(mustJSON(t, a)), "0123456789abcdef") {
		t.Error("a token secret shows in the config's JSON")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestartChanges(t *testing.T) {
	t.Parallel()
	parse := func(src string) *Config {
		t.Helper()
		c, err := Parse([]byte(src), "c.hcl")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tcp := func(addr, secret string) string {
		return "tcp {\n  address = \"" + addr + "\"\n  token \"a\" {\n    secret = \"" + secret + "\"\n  }\n}\n"
	}
	running := parse("engine {\n  workers = 4\n}\n" + tcp("127.0.0.1:1", "0123456789abcdef") + "metrics {\n  address = \"127.0.0.1:2\"\n}\nplugin \"http\" {\n  x = 1\n}\n")
	tests := []struct {
		name string
		cand string
		want []string
	}{
		{"limits and tokens reload", "engine {\n  workers = 9\n}\nlog_level = \"warn\"\nsocket {\n  mode = \"0666\"\n}\n" + tcp("127.0.0.1:1", "fedcba9876543210") + "metrics {\n  address = \"127.0.0.1:2\"\n}\nplugin \"http\" {\n  x = 1\n}\n", nil},
		{"listeners and plugins need a restart", tcp("127.0.0.1:3", "0123456789abcdef") + "plugin \"fs\" {\n}\n",
			[]string{"tcp address (127.0.0.1:1 -> 127.0.0.1:3)", "metrics address (127.0.0.1:2 -> off)", `plugin "fs" section`, `plugin "http" section`}},
		{"tcp off", "metrics {\n  address = \"127.0.0.1:2\"\n}\nplugin \"http\" {\n  x = 1\n}\n", []string{"tcp address (127.0.0.1:1 -> off)"}},
		{"http limits and disk reserve need a restart", tcp("127.0.0.1:1", "0123456789abcdef") + "metrics {\n  address = \"127.0.0.1:2\"\n}\nplugin \"http\" {\n  x = 1\n}\n" +
			"http {\n  read_timeout = \"5s\"\n}\ndisk {\n  min_free = \"0\"\n}\n",
			[]string{"http limits", "disk min_free (the store's reserve is set when it opens)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := RestartChanges(running, parse(tt.cand))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		hash string
		want int64
	}{{"a", 1}, {"a", 1}, {"b", 2}, {"a", 3}, {"a", 3}}
	for i, s := range steps {
		v, err := Assign(ctx, st, s.hash)
		if err != nil {
			t.Fatal(err)
		}
		if v != s.want {
			t.Errorf("step %d: Assign(%q) = %d, want %d", i, s.hash, v, s.want)
		}
	}
	// The version survives a restart: the data directory remembers it.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, err := Assign(ctx, st, "a"); err != nil || v != 3 {
		t.Errorf("after reopening: %d, %v; want 3", v, err)
	}
	if v, err := Assign(ctx, st, "c"); err != nil || v != 4 {
		t.Errorf("after reopening, a new config: %d, %v; want 4", v, err)
	}
}

// TestAssignRecordVersions: a record written before it had a format
// version is read as version 1; one of a newer format is refused, saying
// both versions, and left as it was.
func TestAssignRecordVersions(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ctx := context.Background()
	put := func(rec string) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.MetaPut(MetaKey, []byte(rec)) }); err != nil {
			t.Fatal(err)
		}
	}
	put(`{"version":7,"hash":"a"}`)
	if v, err := Assign(ctx, st, "a"); err != nil || v != 7 {
		t.Fatalf("a record without a format version: %d, %v; want 7", v, err)
	}
	put(`{"v":2,"version":8,"hash":"a"}`)
	_, err := Assign(ctx, st, "b")
	if err == nil || !strings.Contains(err.Error(), "format version 2, this weir reads version 1") {
		t.Fatalf("a newer record: %v, want a refusal naming both versions", err)
	}
	err = st.View(ctx, func(tx store.Tx) error {
		b, err := tx.MetaGet(MetaKey)
		if err == nil && string(b) != `{"v":2,"version":8,"hash":"a"}` {
			err = fmt.Errorf("record changed to %s", b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	full, err := os.ReadFile("testdata/full.hcl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Add([]byte("engine {\n  workers = 4\n}\n"))
	f.Add([]byte("plugin \"x\" {\n  a = { b = [1, 2] }\n}\n"))
	f.Add([]byte("tcp {\n  token \"a\" {\n    secret = \"0123456789abcdef\"\n  }\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse(src, "fuzz.hcl")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error without problems: %T %v", err, err)
			}
			return
		}
		// An accepted config is usable as it stands.
		if c.Engine.Workers < 1 || c.Engine.MaxQueued < 1 || c.Engine.MaxAttempts < 1 || c.Engine.RetryBase > c.Engine.RetryMax {
			t.Fatalf("accepted impossible limits: %+v", c.Engine)
		}
		if c.Socket.Mode&0o600 != 0o600 || c.Socket.Mode&^0o777 != 0 {
			t.Fatalf("accepted socket mode %o", c.Socket.Mode)
		}
		for _, p := range c.Plugins {
			if !json.Valid(p) {
				t.Fatalf("plugin section is not JSON: %s", p)
			}
		}
		_ = c.Hash()
	})
}

func TestJSONShowsWhatAnOperatorWrote(t *testing.T) {
	t.Parallel()
	c, err := Load("testdata/full.hcl")
	if err != nil {
		t.Fatal(err)
	}
	b := string(mustJSON(t, c))
	for _, want := range []string{`"queue_timeout":"2m0s"`, `"drain_grace":"45s"`, `"mode":"0660"`, `"retention_max_age":"720h0m0s"`, `"owner":"ci-bot"`, `"allow_hosts":["api.example.com","example.org"]`} {
		if !strings.Contains(b, want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	for _, secret := range []string{"alice-0123456789abcdef", "ci-0123456789abcdef0123"} {
		if strings.Contains(b, secret) {
			t.Errorf("JSON shows the secret %s", secret)
		}
	}
}

// A token file, or a config file holding a secret, that others may read
// is accepted with a warning naming the file, its mode and the fix, as
// ssh warns of a private key; one only its owner reads gets none.
func TestSecretOpenToOthersWarns(t *testing.T) {
	t.Parallel()
	const fileCfg = "tcp {\n  token \"bob\" {\n    secret_file = \"tok\"\n  }\n}\n"
	const inlineCfg = "tcp {\n  token \"bob\" {\n    secret = \"0123456789abcdef0123\"\n  }\n}\n"
	for _, c := range []struct {
		name             string
		src              string
		tokMode, cfgMode os.FileMode
		want             []string // in the one warning; nil: no warning
	}{
		{"token file world-readable", fileCfg, 0o644, 0o600, []string{"weir.hcl:3: token of \"bob\": secret_file ", "tok and is open to others (mode 0644, not 0600)", "chmod 600"}},
		{"token file group-readable", fileCfg, 0o640, 0o644, []string{"(mode 0640, not 0600)"}},
		{"token file owner only", fileCfg, 0o600, 0o644, nil},
		{"token file read-only for its owner", fileCfg, 0o400, 0o644, nil},
		{"inline secret in a world-readable file", inlineCfg, 0o600, 0o604, []string{"weir.hcl: the file holds a token's secret and is open to others (mode 0604"}},
		{"inline secret, owner only", inlineCfg, 0o600, 0o600, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tok := filepath.Join(dir, "tok")
			path := filepath.Join(dir, "weir.hcl")
			for f, data := range map[string]string{tok: "0123456789abcdef0123\n", path: c.src} {
				if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(tok, c.tokMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.cfgMode); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Tokens()["0123456789abcdef0123"] != "bob" {
				t.Fatalf("the token is not in force: %v", cfg.Tokens())
			}
			if c.want == nil {
				if len(cfg.Warnings) > 0 {
					t.Fatalf("warnings %q", cfg.Warnings)
				}
				return
			}
			if len(cfg.Warnings) != 1 {
				t.Fatalf("warnings %q, want one", cfg.Warnings)
			}
			for _, w := range c.want {
				if !strings.Contains(cfg.Warnings[0], w) {
					t.Errorf("warning %q lacks %q", cfg.Warnings[0], w)
				}
			}
		})
	}
}

// A header naming a variable is read at load; neither its value nor a
// literal one reaches the view, and a change of either changes the hash
// and needs a restart.
func TestTelemetryHeaders(t *testing.T) {
	t.Setenv("WEIR_TEST_OTLP_TOKEN", "Bearer tok-0123456789")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "") // Default's tracing is off
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	src := func(literal string) []byte {
		return []byte("telemetry {\n  otlp_endpoint = \"https://collector.example:4318\"\n" +
			"  headers = { Authorization = \"env:WEIR_TEST_OTLP_TOKEN\", X-Team = \"" + literal + "\" }\n}\n")
	}
	c, err := Parse(src("lit-secret"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Telemetry.On() {
		t.Error("a telemetry block with an endpoint is not on")
	}
	want := map[string]string{"Authorization": "Bearer tok-0123456789", "X-Team": "lit-secret"}
	if got := c.Telemetry.HeaderValues(); !reflect.DeepEqual(got, want) {
		t.Errorf("HeaderValues() = %v, want %v", got, want)
	}
	view := string(mustJSON(t, c))
	if strings.Contains(view, "tok-0123456789") || strings.Contains(view, "lit-secret") {
		t.Errorf("the view shows a header value: %s", view)
	}
	if !strings.Contains(view, `"Authorization":"env:WEIR_TEST_OTLP_TOKEN"`) {
		t.Errorf("the view does not say where Authorization comes from: %s", view)
	}
	other, err := Parse(src("other-secret"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash() == other.Hash() {
		t.Error("another literal header leaves the hash as it was")
	}
	// Another header is a reload (the exporter is swapped); tracing on
	// or off is a restart.
	if rc := RestartChanges(c, other); len(rc) != 0 {
		t.Errorf("RestartChanges = %q for another header, want none: a reload applies it", rc)
	}
	if rc := RestartChanges(c, Default()); len(rc) != 1 || !strings.Contains(rc[0], "telemetry on -> off") {
		t.Errorf("RestartChanges = %q turning tracing off, want the telemetry line", rc)
	}
}

// Without the block and the standard variables tracing is off.
func TestTelemetryOffByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	c := Default()
	if c.Telemetry.On() {
		t.Error("the default config exports traces")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	if !c.Telemetry.On() {
		t.Error("OTEL_EXPORTER_OTLP_ENDPOINT does not turn tracing on")
	}
	if _, err := Parse([]byte("telemetry {\n  sample = 0.1\n}\n"), "t.hcl"); err != nil {
		t.Errorf("a telemetry block whose endpoint is the variable's is refused: %v", err)
	}
}
