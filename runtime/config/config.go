package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// Defaults of the daemon's settings. The engine limits match
// engine.Config's own defaults; they are repeated here so that a loaded
// Config shows the values in force rather than zeros.
const (
	DefaultWorkers      = 64
	DefaultMaxQueued    = 10000
	DefaultQueueTimeout = 10 * time.Minute
	DefaultLeaseTimeout = 30 * time.Second
	DefaultMaxAttempts  = 5
	DefaultRetryBase    = 100 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
	DefaultDrainGrace   = 30 * time.Second
	// DefaultPingInterval and DefaultPingTimeout are the plugin health
	// ping's (plugin_ping { interval, timeout }): a plugin with calls in
	// flight that does not answer within the timeout is killed.
	DefaultPingInterval = 5 * time.Second
	DefaultPingTimeout  = 3 * time.Second
	DefaultLogLevel     = "info"
	DefaultSocketMode   = os.FileMode(0o600)
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

// MarshalJSON shows the config as an operator reads it: durations as
// "30s", the socket mode in octal, token secrets left out.
func (c *Config) MarshalJSON() ([]byte, error) {
	type engineView struct {
		Workers        int    `json:"workers"`
		MaxQueued      int    `json:"max_queued"`
		QueueTimeout   string `json:"queue_timeout"`
		BudgetInFlight int64  `json:"budget_in_flight"`
		RunBudget      int64  `json:"run_budget"`
		LeaseTimeout   string `json:"lease_timeout"`
		MaxAttempts    int    `json:"max_attempts"`
		RetryBase      string `json:"retry_base"`
		RetryMax       string `json:"retry_max"`
	}
	type socketView struct {
		Mode  string `json:"mode"`
		Group string `json:"group,omitempty"`
	}
	e := c.Engine
	qt := e.QueueTimeout.String()
	if e.QueueTimeout < 0 {
		qt = "none"
	}
	type sandboxView struct {
		Workers int    `json:"workers,omitempty"`
		Memory  int64  `json:"memory,omitempty"`
		Timeout string `json:"timeout,omitempty"`
	}
	v := struct {
		File      string                     `json:"file,omitempty"`
		LogLevel  string                     `json:"log_level"`
		MemLimit  int64                      `json:"memory_limit,omitempty"`
		Sandbox   sandboxView                `json:"sandbox"`
		Engine    engineView                 `json:"engine"`
		Grace     string                     `json:"drain_grace"`
		Ping      map[string]string          `json:"plugin_ping"`
		Socket    socketView                 `json:"socket"`
		TCP       *TCP                       `json:"tcp,omitempty"`
		Console   *Console                   `json:"console,omitempty"`
		Metrics   string                     `json:"metrics_address,omitempty"`
		Retention string                     `json:"retention_max_age,omitempty"`
		Store     *Store                     `json:"store,omitempty"`
		Plugins   map[string]json.RawMessage `json:"plugins,omitempty"`
		Host      map[string]PluginHost      `json:"plugin_host,omitempty"`
		DiskFree  string                     `json:"disk_min_free"`
		HTTP      map[string]any             `json:"http"`
	}{
		File: c.File, LogLevel: c.LogLevel, MemLimit: c.MemoryLimit,
		Sandbox: sandboxView{Workers: c.Sandbox.Workers, Memory: c.Sandbox.Memory},
		Engine: engineView{e.Workers, e.MaxQueued, qt, e.BudgetInFlight, e.RunBudget, e.LeaseTimeout.String(),
			e.MaxAttempts, e.RetryBase.String(), e.RetryMax.String()},
		Grace:  c.DrainGrace.String(),
		Ping:   map[string]string{"interval": c.PluginPing.Interval.String(), "timeout": c.PluginPing.Timeout.String()},
		Socket: socketView{fmt.Sprintf("%04o", c.Socket.Mode), c.Socket.Group},
		TCP:    c.TCP, Console: c.Console, Metrics: c.MetricsAddress, Plugins: c.Plugins, Host: c.PluginHost,
		DiskFree: "off",
		HTTP: map[string]any{"read_header_timeout": c.HTTP.ReadHeaderTimeout.String(), "read_timeout": c.HTTP.ReadTimeout.String(),
			"write_timeout": c.HTTP.WriteTimeout.String(), "idle_timeout": c.HTTP.IdleTimeout.String(),
			"max_conns": c.HTTP.MaxConns, "max_conns_per_peer": c.HTTP.MaxConnsPerPeer},
	}
	if c.DiskMinFree > 0 {
		v.DiskFree = engine.Bytes(c.DiskMinFree)
	}
	if c.RetentionMaxAge > 0 {
		v.Retention = c.RetentionMaxAge.String()
	}
	if c.Sandbox.Timeout > 0 {
		v.Sandbox.Timeout = c.Sandbox.Timeout.String()
	}
	if c.Store.URL != "" {
		v.Store = &Store{URL: storeurl.Redact(c.Store.URL), Shared: c.Store.Shared}
	}
	return json.Marshal(v)
}

// Default is the configuration of a daemon started without a file.
func Default() *Config {
	return &Config{
		LogLevel: DefaultLogLevel,
		Engine: Engine{
			Workers: DefaultWorkers, MaxQueued: DefaultMaxQueued, QueueTimeout: DefaultQueueTimeout,
			LeaseTimeout: DefaultLeaseTimeout, MaxAttempts: DefaultMaxAttempts,
			RetryBase: DefaultRetryBase, RetryMax: DefaultRetryMax,
		},
		DrainGrace:  DefaultDrainGrace,
		PluginPing:  PluginPing{Interval: DefaultPingInterval, Timeout: DefaultPingTimeout},
		Socket:      Socket{Mode: DefaultSocketMode, GID: -1},
		DiskMinFree: DefaultDiskMinFree,
		HTTP:        api.HTTPLimits{}.WithDefaults(),
	}
}

// EngineConfig returns the engine limits as an engine.Config carrying
// version as its ConfigVersion. Store, Tools and Logger are the caller's.
func (c *Config) EngineConfig(version int64) engine.Config {
	e := c.Engine
	return engine.Config{
		Workers: e.Workers, MaxQueued: e.MaxQueued, QueueTimeout: e.QueueTimeout,
		MaxBudgetInFlight: e.BudgetInFlight, DefaultRunBudget: e.RunBudget, LeaseTimeout: e.LeaseTimeout,
		MaxAttempts: e.MaxAttempts, RetryBase: e.RetryBase, RetryMax: e.RetryMax,
		Retention: c.RetentionMaxAge, ConfigVersion: version, MinFreeBytes: c.DiskMinFree,
	}
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
// same hash run the daemon the same way. Token secrets enter it hashed.
func (c *Config) Hash() string {
	type tok struct{ Owner, SecretHash string }
	type plain Config // without MarshalJSON: every field, exactly
	v := struct {
		C      plain
		Tokens []tok
	}{C: plain(*c)}
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
