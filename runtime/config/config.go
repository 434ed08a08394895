package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/hooks"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// Defaults of the daemon's own settings. The engine's limits are the
// engine's (engine.DefaultConfig): Default reads them from there, so that
// a loaded Config shows the values in force rather than zeros.
const (
	DefaultDrainGrace = 30 * time.Second
	// DefaultPingInterval and DefaultPingTimeout are the plugin health
	// ping's (plugin_ping { interval, timeout }): a plugin with calls in
	// flight that does not answer within the timeout is killed.
	DefaultPingInterval = 5 * time.Second
	DefaultPingTimeout  = 3 * time.Second
	DefaultLogLevel     = "info"
	// DefaultLogFormat is the daemon log's: lines for a person to read
	// ("json": one JSON object per line, for a collector).
	DefaultLogFormat  = "text"
	DefaultSocketMode = os.FileMode(0o600)
	// DefaultTCPAddress is where the TCP listener binds when its block
	// names no address: loopback only.
	DefaultTCPAddress = "127.0.0.1:7411"
	// DefaultConsoleAddress is where the web console binds when its block
	// names no address: loopback only.
	DefaultConsoleAddress = "127.0.0.1:7412"
	// MinTokenLength bounds how short a bearer token may be: a short
	// secret can be guessed over the network.
	MinTokenLength = 16
	// DefaultDiskMinFree is the disk watermark (disk { min_free }): below
	// it new runs and registrations are refused with E_DISK_FULL. The
	// store keeps half of it in reserve for the work in hand.
	DefaultDiskMinFree = 256 << 20
	// MinDiskMinFree is the smallest watermark accepted (other than 0,
	// off): the store's reserve, half of it, must hold a flush of its
	// 16 MiB write buffer.
	MinDiskMinFree = 32 << 20
)

// Config is the daemon's configuration with every default filled in.
type Config struct {
	// File is the path the config was loaded from ("" for Default).
	File string `json:"file,omitempty"`
	// LogLevel is trace, debug, info, warn or error.
	LogLevel string `json:"log_level"`
	// LogFormat is text or json.
	LogFormat string `json:"log_format"`
	// MemoryLimit is the daemon's soft memory limit in bytes (the Go
	// runtime's GOMEMLIMIT: it collects harder as the heap nears it); 0
	// leaves the runtime's own (the GOMEMLIMIT variable, else none).
	MemoryLimit int64 `json:"memory_limit,omitempty"`
	// Sandbox holds the limits of the sandbox that evaluates flow
	// scripts; zeros are runtime/sandbox's defaults.
	Sandbox Sandbox `json:"sandbox"`
	// Engine holds the engine's limits.
	Engine Engine `json:"engine"`
	// DrainGrace is how long held work may drain on stop before what is
	// left is cancelled.
	DrainGrace time.Duration `json:"drain_grace"`
	// PluginPing is the health ping of plugins with calls in flight.
	PluginPing PluginPing `json:"plugin_ping"`
	// Socket is the Unix socket's access.
	Socket Socket `json:"socket"`
	// TCP is the optional TCP listener (nil: off).
	TCP *TCP `json:"tcp,omitempty"`
	// Console is the optional web console (nil: off). Its sign-in takes
	// TCP's tokens.
	Console *Console `json:"console,omitempty"`
	// MetricsAddress is the optional HTTP address serving /metrics for
	// Prometheus ("": off).
	MetricsAddress string `json:"metrics_address,omitempty"`
	// RetentionMaxAge is how long finished runs, their events and dedup
	// keys are kept (0: forever).
	RetentionMaxAge time.Duration `json:"retention_max_age,omitempty"`
	// EventRetention is how long an owner's event is kept for a wait
	// that opens after it.
	EventRetention time.Duration `json:"event_retention"`
	// Store is the store the daemon keeps its records in.
	Store Store `json:"store"`
	// DiskMinFree is the free-space watermark of the data directory's
	// disk (0: off); see DefaultDiskMinFree.
	DiskMinFree int64 `json:"disk_min_free"`
	// HTTP holds the timeouts and connection caps of every listener.
	HTTP api.HTTPLimits `json:"http"`
	// Plugins holds each plugin's section, as JSON, by plugin name.
	Plugins map[string]json.RawMessage `json:"plugins,omitempty"`
	// PluginHost holds the host-reserved keys of each plugin block (env,
	// memory_max), stripped from the section the plugin sees.
	PluginHost map[string]PluginHost `json:"plugin_host,omitempty"`
	// Owners holds each owner block's share and quotas, by owner;
	// DefaultOwner is the default_owner block's, every other owner's
	// (owners.go).
	Owners       map[string]engine.OwnerShare `json:"owners,omitempty"`
	DefaultOwner engine.OwnerShare            `json:"default_owner"`
	// Hooks are the hook blocks, in the file's order, each secret read
	// from its file (hooks.go). The handler of POST /v1/hooks/{name}
	// takes them at start and on every reload.
	Hooks []hooks.Hook `json:"hooks,omitempty"`
	// Telemetry is where run traces are exported (telemetry.go); off
	// unless it or the OTEL_EXPORTER_OTLP_* variables name an endpoint.
	Telemetry Telemetry `json:"telemetry"`

	// Warnings are what the file allows but an operator should fix, as
	// ssh warns of a private key others can read: a token secret_file,
	// or a file holding a token secret, that other users can read.
	// `weir config check` prints them and the daemon logs them at start
	// and reload.
	Warnings []string `json:"-"`

	// pluginWhere locates each plugin block and its keys, for messages.
	pluginWhere map[string]pluginPos
	// inlineSecret is a token written in the file itself (secret = ...).
	inlineSecret bool
}

// Store names the store: the embedded Badger store in the data directory
// (URL empty), or a PostgreSQL database. The URL may hold a password: it
// is written only through storeurl.Redact.
type Store struct {
	URL string `json:"url,omitempty"`
	// Shared lets several daemons use the database at once, a fleet
	// (docs/operators.md, "Running a fleet"); every daemon of the fleet
	// sets it.
	Shared bool `json:"shared,omitempty"`
}

// PluginHost is what a plugin block says to the host rather than to the
// plugin (docs/design.md §11).
type PluginHost struct {
	// Env names variables of weir's environment passed to this plugin
	// alone (API keys, tokens). Only names: values are never kept here.
	Env []string `json:"env,omitempty"`
	// MemoryMax caps the plugin process's data segment in bytes
	// (RLIMIT_DATA); 0: no cap.
	MemoryMax int64 `json:"memory_max,omitempty"`
}

// PluginEnvs returns each plugin's env names, by plugin name.
func (c *Config) PluginEnvs() map[string][]string {
	out := map[string][]string{}
	for n, h := range c.PluginHost {
		if len(h.Env) > 0 {
			out[n] = h.Env
		}
	}
	return out
}

// PluginMemoryMaxes returns each plugin's memory_max, by plugin name.
func (c *Config) PluginMemoryMaxes() map[string]int64 {
	out := map[string]int64{}
	for n, h := range c.PluginHost {
		if h.MemoryMax > 0 {
			out[n] = h.MemoryMax
		}
	}
	return out
}

type pluginPos struct {
	block string            // file:line of the block
	keys  map[string]string // file:line of each of its keys
}

// PluginWhere returns the file:line of a key of plugin's block ("" key:
// the block itself), or "" if the config did not come from a file.
func (c *Config) PluginWhere(plugin, key string) string {
	p, ok := c.pluginWhere[plugin]
	if !ok {
		return ""
	}
	if w, ok := p.keys[key]; ok && key != "" {
		return w
	}
	return p.block
}

// Engine holds the engine limits of the file's engine block.
type Engine struct {
	Workers        int           `json:"workers"`
	SpareWorkers   int           `json:"spare_workers,omitempty"`
	MaxQueued      int           `json:"max_queued"`
	QueueTimeout   time.Duration `json:"queue_timeout"` // negative: no deadline
	BudgetInFlight int64         `json:"budget_in_flight"`
	RunBudget      int64         `json:"run_budget"`
	LeaseTimeout   time.Duration `json:"lease_timeout"`
	MaxAttempts    int           `json:"max_attempts"`
	RetryBase      time.Duration `json:"retry_base"`
	RetryMax       time.Duration `json:"retry_max"`
}

// Sandbox holds the file's sandbox block (runtime/sandbox.Config).
type Sandbox struct {
	// Workers is the most sandbox worker processes at once.
	Workers int `json:"workers,omitempty"`
	// SpareWorkers is how many more may run for owners below their share.
	SpareWorkers int `json:"spare_workers,omitempty"`
	// Memory is each worker's memory cap in bytes (RLIMIT_DATA).
	Memory int64 `json:"memory,omitempty"`
	// Timeout is the wall deadline (and CPU allowance) of one evaluation.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// PluginPing is the plugin_ping block: how often the host asks a plugin
// with calls in flight whether it still answers, and how long it waits
// for the answer before it kills the plugin (a hung plugin would hold its
// calls until their deadlines). Reloadable.
type PluginPing struct {
	Interval time.Duration `json:"interval"`
	Timeout  time.Duration `json:"timeout"`
}

// Socket says who may connect to the Unix socket. Who a caller is comes
// from the kernel (SO_PEERCRED), whatever the mode.
type Socket struct {
	Mode os.FileMode `json:"mode"`
	// Group is the socket's group as written (name or number), GID its
	// number; GID is -1 when the file names no group.
	Group string `json:"group,omitempty"`
	GID   int    `json:"gid"`
}

// TCP is the optional TCP listener.
type TCP struct {
	Address string `json:"address"`
	// AllowRemote must be set to bind an address that is not loopback
	// without TLS: bearer tokens would travel in the clear.
	AllowRemote bool    `json:"allow_remote,omitempty"`
	Tokens      []Token `json:"tokens"`
	// TLS, if set, makes the listener speak TLS only.
	TLS *TLS `json:"tls,omitempty"`
}

// TLS is a listener's certificate: a `tls { cert_file, key_file }` block,
// the same in every listener block that takes one. The files are read
// at start and again on every reload (package tlscert), so a renewed
// certificate is taken without a restart.
type TLS struct {
	// CertFile is the PEM certificate, its chain after it.
	CertFile string `json:"cert_file"`
	// KeyFile is the PEM private key of the certificate.
	KeyFile string `json:"key_file"`
}

// Console is the optional web console's listener.
type Console struct {
	Address string `json:"address"`
	// AllowRemote must be set to bind an address that is not loopback:
	// the sign-in token and the session cookie travel in the clear over
	// plain HTTP. (A tls block will later sit here, shared with tcp.)
	AllowRemote bool `json:"allow_remote,omitempty"`
}

// Token maps a bearer token to the owner it authenticates.
type Token struct {
	Owner  string `json:"owner"`
	Secret string `json:"-"`
	// Where says where the token was declared (file:line), for messages.
	Where string `json:"-"`
}

// MarshalJSON shows the config as an operator reads it (the knobs' JSON
// paths): durations as "30s", the socket mode in octal, the store's URL
// redacted, token secrets left out.
func (c *Config) MarshalJSON() ([]byte, error) {
	v := &object{}
	if c.File != "" {
		v.set([]string{"file"}, c.File)
	}
	// The blocks of a structure of their own, each after the knobs it
	// follows in the view.
	after := map[string]func(){
		"socket": func() {
			if c.TCP != nil {
				v.set([]string{"tcp"}, c.TCP)
			}
			if c.Console != nil {
				v.set([]string{"console"}, c.Console)
			}
		},
		"store": func() {
			if len(c.Plugins) > 0 {
				v.set([]string{"plugins"}, c.Plugins)
			}
			if len(c.PluginHost) > 0 {
				v.set([]string{"plugin_host"}, c.PluginHost)
			}
			if len(c.Owners) > 0 {
				owners := &object{}
				names := make([]string, 0, len(c.Owners))
				for n := range c.Owners {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					owners.set([]string{n}, ownerView(c.Owners[n]))
				}
				v.set([]string{"owners"}, owners)
			}
			if c.DefaultOwner != (engine.OwnerShare{}) {
				v.set([]string{"default_owner"}, ownerView(c.DefaultOwner))
			}
			if len(c.Hooks) > 0 {
				hs := make([]*object, len(c.Hooks))
				for i, hk := range c.Hooks {
					hs[i] = hookView(hk)
				}
				v.set([]string{"hooks"}, hs)
			}
		},
	}
	hidden := map[string]bool{}
	for i, k := range Knobs {
		path := strings.Split(k.JSON, ".")
		val, shown := k.view(c)
		if !shown && k.hidesBlock {
			hidden[path[0]] = true
		}
		if len(path) > 1 {
			v.set(path[:1], nil) // the block is shown even with nothing in it
		}
		if shown && !hidden[path[0]] {
			v.set(path, val)
		}
		if top := path[0]; i+1 == len(Knobs) || strings.Split(Knobs[i+1].JSON, ".")[0] != top {
			if hidden[top] {
				v.remove(top)
			}
			if f := after[top]; f != nil {
				f()
			}
		}
	}
	return json.Marshal(v)
}

// object is a JSON object that keeps its keys in the order they were set.
type object struct {
	keys []string
	vals map[string]any
}

// set sets the value at path, making the objects on the way; a nil val
// only makes them.
func (o *object) set(path []string, val any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	k := path[0]
	cur, ok := o.vals[k]
	if !ok {
		o.keys = append(o.keys, k)
	}
	switch {
	case len(path) > 1 || (val == nil && !ok):
		sub, _ := cur.(*object)
		if sub == nil {
			sub = &object{}
			o.vals[k] = sub
		}
		if len(path) > 1 {
			sub.set(path[1:], val)
		}
	case val != nil:
		o.vals[k] = val
	}
}

func (o *object) remove(k string) {
	for i, x := range o.keys {
		if x == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			delete(o.vals, k)
			return
		}
	}
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// Default is the configuration of a daemon started without a file: the
// engine's limits from engine.DefaultConfig, the daemon's own settings
// from the constants above.
func Default() *Config {
	c := &Config{}
	e := engine.DefaultConfig()
	for _, k := range Knobs {
		if k.engine != nil {
			reflect.ValueOf(k.field(c)).Elem().Set(reflect.ValueOf(k.engine(&e)).Elem())
		}
	}
	c.LogLevel = DefaultLogLevel
	c.LogFormat = DefaultLogFormat
	c.DrainGrace = DefaultDrainGrace
	c.PluginPing = PluginPing{Interval: DefaultPingInterval, Timeout: DefaultPingTimeout}
	c.Socket = Socket{Mode: DefaultSocketMode, GID: -1}
	// The engine's watermark is off; a daemon keeps one.
	c.DiskMinFree = DefaultDiskMinFree
	c.HTTP = api.HTTPLimits{}.WithDefaults()
	c.Telemetry = Telemetry{Protocol: DefaultTelemetryProtocol, Sample: DefaultTelemetrySample, ServiceName: DefaultTelemetryServiceName}
	return c
}

// EngineConfig returns the knobs that set the engine as an engine.Config
// carrying version as its ConfigVersion. Store, Tools and Logger are the
// caller's.
func (c *Config) EngineConfig(version int64) engine.Config {
	ec := engine.Config{ConfigVersion: version}
	for _, k := range Knobs {
		if k.engine != nil {
			reflect.ValueOf(k.engine(&ec)).Elem().Set(reflect.ValueOf(k.field(c)).Elem())
		}
	}
	if len(c.Owners) > 0 {
		ec.Owners = make(map[string]engine.OwnerShare, len(c.Owners))
		for n, s := range c.Owners {
			ec.Owners[n] = s
		}
	}
	ec.DefaultOwner = c.DefaultOwner
	return ec
}

// Tokens returns the TCP tokens as secret → owner (nil without TCP).
func (c *Config) Tokens() map[string]string {
	if c.TCP == nil {
		return nil
	}
	out := make(map[string]string, len(c.TCP.Tokens))
	for _, t := range c.TCP.Tokens {
		out[t.Secret] = t.Owner
	}
	return out
}

// Hash identifies the config's effective content: two configs with the
// same hash run the daemon the same way. Token and hook secrets and
// telemetry headers enter it hashed.
func (c *Config) Hash() string {
	type tok struct{ Owner, SecretHash string }
	type plain Config // without MarshalJSON: every field, exactly
	v := struct {
		C          plain
		Tokens     []tok
		HookSecret []string
		Telemetry  map[string]string // header name → its spec, hashed
	}{C: plain(*c), Telemetry: map[string]string{}}
	for n, spec := range c.Telemetry.Headers {
		s := sha256.Sum256([]byte(spec))
		v.Telemetry[n] = hex.EncodeToString(s[:])
	}
	for _, hk := range c.Hooks {
		s := sha256.Sum256(hk.Secret)
		v.HookSecret = append(v.HookSecret, hex.EncodeToString(s[:]))
	}
	v.C.File = "" // the same content under another name is the same config
	if c.TCP != nil {
		for _, t := range c.TCP.Tokens {
			s := sha256.Sum256([]byte(t.Secret))
			v.Tokens = append(v.Tokens, tok{t.Owner, hex.EncodeToString(s[:])})
		}
		sort.Slice(v.Tokens, func(i, j int) bool {
			return v.Tokens[i].Owner+v.Tokens[i].SecretHash < v.Tokens[j].Owner+v.Tokens[j].SecretHash
		})
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("config: hashing: %v", err)) // only plain values and valid JSON
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RestartChanges lists the settings that differ between the config in
// force and a candidate and that only a restart can apply: the listeners
// and the plugins' sections (a plugin reads its section when it is
// launched). A reload whose candidate changes any of them is refused, so
// the config in force is always exactly one file's content.
func RestartChanges(running, candidate *Config) []string {
	var out []string
	addr := func(t *TCP) string {
		if t == nil {
			return "off"
		}
		return t.Address
	}
	if addr(running.TCP) != addr(candidate.TCP) {
		out = append(out, fmt.Sprintf("tcp address (%s -> %s)", addr(running.TCP), addr(candidate.TCP)))
	} else if tlsOn := func(t *TCP) bool { return t != nil && t.TLS != nil }; tlsOn(running.TCP) != tlsOn(candidate.TCP) {
		// Another certificate is a reload; TLS on or off is another listener.
		out = append(out, fmt.Sprintf("tcp tls (%s -> %s)", onOff(tlsOn(running.TCP)), onOff(tlsOn(candidate.TCP))))
	}
	if running.Store.URL != candidate.Store.URL {
		out = append(out, fmt.Sprintf("store (%s -> %s)", orEmbedded(running.Store.URL), orEmbedded(candidate.Store.URL)))
	}
	if running.Store.Shared != candidate.Store.Shared {
		out = append(out, fmt.Sprintf("store shared (%t -> %t)", running.Store.Shared, candidate.Store.Shared))
	}
	if running.Sandbox != candidate.Sandbox {
		out = append(out, "sandbox block (its workers start with the daemon)")
	}
	if running.HTTP != candidate.HTTP {
		out = append(out, "http limits")
	}
	if running.LogFormat != candidate.LogFormat {
		out = append(out, fmt.Sprintf("log format (%s -> %s)", running.LogFormat, candidate.LogFormat))
	}
	if running.DiskMinFree != candidate.DiskMinFree {
		out = append(out, "disk min_free (the store's reserve is set when it opens)")
	}
	consoleAddr := func(cc *Console) string {
		if cc == nil {
			return "off"
		}
		return cc.Address
	}
	if consoleAddr(running.Console) != consoleAddr(candidate.Console) {
		out = append(out, fmt.Sprintf("console address (%s -> %s)", consoleAddr(running.Console), consoleAddr(candidate.Console)))
	}
	if running.MetricsAddress != candidate.MetricsAddress {
		out = append(out, fmt.Sprintf("metrics address (%s -> %s)", orOff(running.MetricsAddress), orOff(candidate.MetricsAddress)))
	}
	if running.Telemetry.On() != candidate.Telemetry.On() {
		out = append(out, fmt.Sprintf("telemetry %s -> %s (the trace outbox is kept only while tracing is on)", onOff(running.Telemetry.On()), onOff(candidate.Telemetry.On())))
	}
	names := map[string]bool{}
	for n := range running.Plugins {
		names[n] = true
	}
	for n := range candidate.Plugins {
		names[n] = true
	}
	for n := range running.PluginHost {
		names[n] = true
	}
	for n := range candidate.PluginHost {
		names[n] = true
	}
	var changed []string
	for n := range names {
		rh, _ := json.Marshal(running.PluginHost[n])
		ch, _ := json.Marshal(candidate.PluginHost[n])
		if string(running.Plugins[n]) != string(candidate.Plugins[n]) || string(rh) != string(ch) {
			changed = append(changed, n)
		}
	}
	sort.Strings(changed)
	for _, n := range changed {
		out = append(out, fmt.Sprintf("plugin %q section", n))
	}
	return out
}

// orEmbedded writes a store URL for a message: redacted, or "embedded".
func orEmbedded(u string) string {
	if u == "" {
		return "embedded"
	}
	return storeurl.Redact(u)
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

// Error is a config file that cannot be used: every problem found, each
// with its file:line.
type Error struct {
	Problems []string
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid config: " + e.Problems[0]
	}
	return "invalid config:\n  " + strings.Join(e.Problems, "\n  ")
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
