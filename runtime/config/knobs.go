package config

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/sandbox"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// Knob is one setting of the daemon, in every place it is spelled: its
// key in the file, weir serve's flag, its environment variable, its field
// in the config view and the engine.Config field it sets. Knobs is the
// one list of them: the file's schema, serve's flags, the view, the
// engine's config and the configuration table of docs/operators.md are
// all made from it, and a test fails when a Config or engine.Config
// field is neither a knob nor named as not one.
type Knob struct {
	// HCL is the key in the file: "log_level" at the top level, or
	// "engine.lease_timeout" for an attribute of a block.
	HCL string
	// Flag is weir serve's flag without its dashes ("": none). A flag
	// given on the command line pins the setting against the file, at
	// start and on every reload, unless the knob has an Env: then it is
	// read as the flag, else the variable, else the file.
	Flag string
	// Env is the environment variable weir serve reads it from ("":
	// none).
	Env string
	// JSON is the setting's path in the config view (weir config check
	// --json): "engine.lease_timeout", "drain_grace". Left out of a row
	// of Knobs, it is HCL.
	JSON string
	// Doc is the line an operator reads, in serve's help and in the
	// configuration table.
	Doc string
	// Reload says a reload applies a change; otherwise only a restart
	// does (RestartChanges refuses the reload).
	Reload bool

	// field points at the setting in a Config.
	field func(*Config) any
	// engine points at the engine.Config field it sets (nil: none). Its
	// default is the engine's: Default reads engine.DefaultConfig.
	engine func(*engine.Config) any
	kind   kind
	// zero says what a zero value means, in the table ("" : the value).
	zero string
	// omitEmpty leaves a zero value out of the view; hidesBlock leaves
	// the knob's whole block out.
	omitEmpty, hidesBlock bool
	// show is the value in the view (nil: a number, a string, or a
	// duration as "30s").
	show func(v any) any
	// missing is the problem when the knob's block is in the file
	// without it ("": the knob is optional).
	missing string
}

// kind is how a knob's value is read from the file and checked when it
// comes from elsewhere (a flag).
type kind struct {
	// unit says what the value is (Knob.Unit).
	unit   string
	decode func(d *decoder, name string, expr hcl.Expression, c *Config, dst any)
	// check returns what is wrong with v ("": nothing), worded to follow
	// the flag's name; nil checks nothing.
	check func(v any) string
}

func count(min int) kind {
	return kind{
		unit: "count",
		decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
			d.intAttr(expr, name, dst.(*int), min)
		},
		check: func(v any) string {
			if n := v.(int); n < min {
				return fmt.Sprintf("must be at least %d", min)
			}
			return ""
		},
	}
}

func count64(min int64) kind {
	return kind{
		unit: "count",
		decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
			d.int64Attr(expr, name, dst.(*int64), min)
		},
		check: func(v any) string {
			if n := v.(int64); n < min {
				if min == 0 {
					return "must not be negative"
				}
				return fmt.Sprintf("must be at least %d", min)
			}
			return ""
		},
	}
}

func duration(r durationRule) kind {
	return kind{
		unit: "duration",
		decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
			d.durationAttr(expr, name, dst.(*time.Duration), r)
		},
		check: func(v any) string {
			switch n := v.(time.Duration); {
			case r.none != "":
				return "" // a negative value is the word's: no deadline
			case r.allowZero && n < 0:
				return "must not be negative"
			case !r.allowZero && n <= 0:
				return "must be positive"
			}
			return ""
		},
	}
}

func size(min int64) kind {
	return kind{unit: "size", decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
		*dst.(*int64) = d.size(expr, name, min)
	}}
}

func text(check func(d *decoder, expr hcl.Expression, s string)) kind {
	return kind{unit: "string", decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
		if d.stringAttr(expr, name, dst.(*string)) && check != nil {
			check(d, expr, *dst.(*string))
		}
	}}
}

var logFormatKind = kind{unit: "string",
	decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
		if s := dst.(*string); d.stringAttr(expr, name, s) && *s != "text" && *s != "json" {
			d.fail(expr.Range(), "log_format must be text or json; got %q", *s)
		}
	},
	check: func(v any) string {
		if s := v.(string); s != "text" && s != "json" {
			return fmt.Sprintf("must be text or json, not %q", s)
		}
		return ""
	},
}

var logLevelKind = kind{unit: "string",
	decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
		if s := dst.(*string); d.stringAttr(expr, name, s) && !logLevels[*s] {
			d.fail(expr.Range(), "log_level must be one of trace, debug, info, warn, error; got %q", *s)
		}
	},
	check: func(v any) string {
		if !logLevels[v.(string)] {
			return fmt.Sprintf("must be trace, debug, info, warn or error, not %q", v)
		}
		return ""
	},
}

var boolKind = kind{unit: "bool", decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
	d.value(expr, name, dst)
}}

var socketModeKind = kind{unit: "mode", decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
	var mode string
	if v, diags := expr.Value(nil); !diags.HasErrors() && !v.IsNull() && v.Type() != cty.String {
		// A number loses how it was written: 0660 and 660 are one value.
		d.fail(expr.Range(), "socket mode must be octal permission bits as a string, e.g. \"0660\"")
	} else if d.stringAttr(expr, name, &mode) {
		m, err := strconv.ParseUint(mode, 8, 32)
		switch {
		case err != nil || m > 0o777:
			d.fail(expr.Range(), "socket mode must be octal permission bits as a string, e.g. \"0660\"; got %q", mode)
		case m&0o600 != 0o600:
			d.fail(expr.Range(), "socket mode %q must let the daemon's own user read and write (0600)", mode)
		case m&0o111 != 0:
			d.fail(expr.Range(), "socket mode %q has execute bits, which mean nothing on a socket", mode)
		default:
			*dst.(*os.FileMode) = os.FileMode(m)
		}
	}
}}

var socketGroupKind = kind{unit: "string", decode: func(d *decoder, name string, expr hcl.Expression, c *Config, dst any) {
	var group string
	if d.stringAttr(expr, name, &group) {
		*dst.(*string) = group
		gid, err := lookupGroup(group)
		if err != nil {
			d.fail(expr.Range(), "socket group %q: %v", group, err)
			return
		}
		c.Socket.GID = gid
	}
}}

var diskMinFreeKind = kind{unit: "size", decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
	var sz string
	if d.stringAttr(expr, name, &sz) {
		n, err := ParseSize(sz)
		switch {
		case err != nil:
			d.fail(expr.Range(), "disk min_free: %v", err)
		case n != 0 && n < MinDiskMinFree:
			d.fail(expr.Range(), "disk min_free %q is below the minimum of 32MiB (the store keeps half of it for a flush of its 16 MiB buffer); write \"0\" to turn the check off", sz)
		default:
			*dst.(*int64) = n
		}
	}
}}

func checkMetricsAddress(d *decoder, expr hcl.Expression, s string) {
	if _, _, err := net.SplitHostPort(s); err != nil {
		d.fail(expr.Range(), "metrics address %q: %v (write host:port, e.g. \"127.0.0.1:9411\")", s, err)
	}
}

func checkStoreURL(d *decoder, expr hcl.Expression, s string) {
	if err := storeurl.Check(s); err != nil {
		d.fail(expr.Range(), "%v", err)
	}
}

// Knobs is every setting of the daemon, in the order of the config view
// and of the configuration table. A new setting is added here, and only
// here, first.
var Knobs = []*Knob{
	{HCL: "log_level", Flag: "log-level", Reload: true,
		Doc:   "trace, debug, info, warn or error",
		field: func(c *Config) any { return &c.LogLevel }, kind: logLevelKind},
	{HCL: "log_format", Flag: "log-format",
		Doc:   "text, or json: one JSON object per line (time, level, name, message and each field), for a log collector",
		field: func(c *Config) any { return &c.LogFormat }, kind: logFormatKind},
	{HCL: "memory_limit", Reload: true, omitEmpty: true, zero: "none (the `GOMEMLIMIT` variable, else none)",
		Doc:   "the daemon's soft memory limit (Go's GOMEMLIMIT), at least 64MiB",
		field: func(c *Config) any { return &c.MemoryLimit }, kind: size(MinMemoryLimit)},

	{HCL: "sandbox.workers", omitEmpty: true, zero: "the CPUs Go uses (`GOMAXPROCS`)",
		Doc:   "sandbox worker processes evaluating flow scripts at once",
		field: func(c *Config) any { return &c.Sandbox.Workers }, kind: count(1)},
	{HCL: "sandbox.spare_workers", omitEmpty: true, zero: "a quarter of `sandbox.workers`, at least 1",
		Doc:   "more sandbox workers that only an owner below its share (the workers divided by the owners holding one) may take, so its first evaluation never waits behind another owner's callables",
		field: func(c *Config) any { return &c.Sandbox.SpareWorkers }, kind: count(1)},
	{HCL: "sandbox.memory", omitEmpty: true, zero: "`" + sizeText(sandbox.DefaultMemory) + "` (`sandbox.DefaultMemory`)",
		Doc:   "each sandbox worker's memory cap, at least 64MiB",
		field: func(c *Config) any { return &c.Sandbox.Memory }, kind: size(MinSandboxMemory)},
	{HCL: "sandbox.timeout", omitEmpty: true, zero: "`" + durationText(sandbox.DefaultTimeout) + "` (`sandbox.DefaultTimeout`)",
		Doc:   "the deadline of one evaluation: a registration's load and checks, or one step's callables",
		field: func(c *Config) any { return &c.Sandbox.Timeout }, kind: duration(durationRule{})},

	{HCL: "engine.workers", Flag: "workers", Reload: true,
		Doc:    "worker slots",
		field:  func(c *Config) any { return &c.Engine.Workers },
		engine: func(e *engine.Config) any { return &e.Workers }, kind: count(1)},
	{HCL: "engine.spare_workers", Reload: true, omitEmpty: true, zero: "an eighth of `engine.workers`, at least 1",
		Doc:    "more worker slots that only an owner below its weighted share of the slots may take, so its first task (and the next, while it is under its share) never waits behind another owner's tasks holding every slot",
		field:  func(c *Config) any { return &c.Engine.SpareWorkers },
		engine: func(e *engine.Config) any { return &e.SpareWorkers }, kind: count(1)},
	{HCL: "engine.max_queued", Flag: "max-queued", Reload: true,
		Doc:    "runs accepted but not started before new ones are refused (E_QUEUE_FULL)",
		field:  func(c *Config) any { return &c.Engine.MaxQueued },
		engine: func(e *engine.Config) any { return &e.MaxQueued }, kind: count(1)},
	{HCL: "engine.queue_timeout", Flag: "queue-timeout", Reload: true,
		Doc:    "how long a task may wait for a slot before it is dropped (E_QUEUE_TIMEOUT); \"none\" in the file: no deadline",
		field:  func(c *Config) any { return &c.Engine.QueueTimeout },
		engine: func(e *engine.Config) any { return &e.QueueTimeout }, kind: duration(durationRule{none: "none", noneValue: -1}),
		show: func(v any) any {
			if d := v.(time.Duration); d >= 0 {
				return d.String()
			}
			return "none"
		}},
	{HCL: "engine.budget_in_flight", Flag: "budget-in-flight", Reload: true, zero: "0 (unlimited)",
		Doc:    "cost units running tasks may hold at once (0: unlimited)",
		field:  func(c *Config) any { return &c.Engine.BudgetInFlight },
		engine: func(e *engine.Config) any { return &e.MaxBudgetInFlight }, kind: count64(0)},
	{HCL: "engine.run_budget", Flag: "run-budget", Reload: true, zero: "0 (unlimited)",
		Doc:    "budget of runs whose flow declares none (0: unlimited)",
		field:  func(c *Config) any { return &c.Engine.RunBudget },
		engine: func(e *engine.Config) any { return &e.DefaultRunBudget }, kind: count64(0)},
	{HCL: "engine.lease_timeout", Flag: "lease-timeout", Reload: true,
		Doc:    "lease deadline; holders renew at a third of it",
		field:  func(c *Config) any { return &c.Engine.LeaseTimeout },
		engine: func(e *engine.Config) any { return &e.LeaseTimeout }, kind: duration(durationRule{})},
	{HCL: "engine.max_attempts", Reload: true,
		Doc:    "leases a task may lose (crashes, expiries) before it is dead-lettered",
		field:  func(c *Config) any { return &c.Engine.MaxAttempts },
		engine: func(e *engine.Config) any { return &e.MaxAttempts }, kind: count(1)},
	{HCL: "engine.retry_base", Reload: true,
		Doc:    "first backoff of a retryable tool error, doubling up to retry_max, full jitter",
		field:  func(c *Config) any { return &c.Engine.RetryBase },
		engine: func(e *engine.Config) any { return &e.RetryBase }, kind: duration(durationRule{})},
	{HCL: "engine.retry_max", Reload: true,
		Doc:    "longest backoff of a retryable tool error; at least retry_base",
		field:  func(c *Config) any { return &c.Engine.RetryMax },
		engine: func(e *engine.Config) any { return &e.RetryMax }, kind: duration(durationRule{})},

	{HCL: "drain.grace", Flag: "grace", JSON: "drain_grace", Reload: true,
		Doc:   "how long held work may drain on stop before it is cancelled",
		field: func(c *Config) any { return &c.DrainGrace }, kind: duration(durationRule{allowZero: true})},

	{HCL: "plugin_ping.interval", Reload: true,
		Doc:   "how often a plugin with calls in flight is asked whether it still answers",
		field: func(c *Config) any { return &c.PluginPing.Interval }, kind: duration(durationRule{})},
	{HCL: "plugin_ping.timeout", Reload: true,
		Doc:   "how long a ping waits for its answer before the plugin is killed",
		field: func(c *Config) any { return &c.PluginPing.Timeout }, kind: duration(durationRule{})},

	{HCL: "socket.mode", Reload: true,
		Doc:   "the Unix socket's permission bits, octal; at least 0600, no execute bits",
		field: func(c *Config) any { return &c.Socket.Mode }, kind: socketModeKind,
		show: func(v any) any { return fmt.Sprintf("%04o", v.(os.FileMode)) }},
	{HCL: "socket.group", Reload: true, omitEmpty: true, zero: "none",
		Doc:   "the Unix socket's group, by name or number",
		field: func(c *Config) any { return &c.Socket.Group }, kind: socketGroupKind},

	{HCL: "metrics.address", JSON: "metrics_address", omitEmpty: true, zero: "off",
		Doc:     "host:port serving /metrics for Prometheus",
		missing: "the metrics block needs an address (host:port), e.g. \"127.0.0.1:9411\"",
		field:   func(c *Config) any { return &c.MetricsAddress }, kind: text(checkMetricsAddress)},
	{HCL: "retention.max_age", JSON: "retention_max_age", Reload: true, omitEmpty: true, zero: "forever",
		Doc:     "finished runs older than this are pruned, with their events and dedup keys",
		missing: "the retention block needs max_age, e.g. \"30d\" (leave the block out to keep finished runs forever)",
		field:   func(c *Config) any { return &c.RetentionMaxAge },
		engine:  func(e *engine.Config) any { return &e.Retention }, kind: duration(durationRule{})},
	{HCL: "event_retention", Reload: true,
		Doc:    "how long an event is kept for a run that starts waiting for it after it came (at most 10,000 per owner, the oldest dropped)",
		field:  func(c *Config) any { return &c.EventRetention },
		engine: func(e *engine.Config) any { return &e.EventRetention }, kind: duration(durationRule{})},
	{HCL: "store.url", Flag: "store", Env: "WEIR_STORE", hidesBlock: true, zero: "the embedded store",
		Doc:     "PostgreSQL URL of the store",
		missing: "the store block needs a url, e.g. \"postgres://weir@db.example:5432/weir\" (leave the block out for the embedded store in the data directory)",
		field:   func(c *Config) any { return &c.Store.URL }, kind: text(checkStoreURL),
		show: func(v any) any { return storeurl.Redact(v.(string)) }},
	{HCL: "store.shared", Flag: "shared", Env: "WEIR_STORE_SHARED", omitEmpty: true,
		Doc:   "share the PostgreSQL store with other daemons, a fleet",
		field: func(c *Config) any { return &c.Store.Shared }, kind: boolKind},

	{HCL: "disk.min_free", JSON: "disk_min_free", zero: "0 (off)",
		Doc:    "free space of the data directory's disk below which new runs are refused (E_DISK_FULL); \"0\": off",
		field:  func(c *Config) any { return &c.DiskMinFree },
		engine: func(e *engine.Config) any { return &e.MinFreeBytes }, kind: diskMinFreeKind,
		show: func(v any) any {
			if n := v.(int64); n > 0 {
				return engine.Bytes(n)
			}
			return "off"
		}},

	{HCL: "http.idle_timeout",
		Doc:   "how long a kept-alive connection may wait for its next request",
		field: func(c *Config) any { return &c.HTTP.IdleTimeout }, kind: duration(durationRule{})},
	{HCL: "http.max_conns",
		Doc:   "connections open at once on one listener (E_TOO_MANY_CONNECTIONS beyond)",
		field: func(c *Config) any { return &c.HTTP.MaxConns }, kind: count(1)},
	{HCL: "http.max_conns_per_peer",
		Doc:   "connections of one OS user on the socket",
		field: func(c *Config) any { return &c.HTTP.MaxConnsPerPeer }, kind: count(1)},
	{HCL: "http.max_conns_per_ip",
		Doc:   "connections of one IP address on TCP, whatever tokens they carry",
		field: func(c *Config) any { return &c.HTTP.MaxConnsPerIP }, kind: count(1)},
	{HCL: "http.max_requests_per_owner",
		Doc:   "requests of one owner in progress at once, streams aside (E_TOO_MANY_REQUESTS beyond)",
		field: func(c *Config) any { return &c.HTTP.MaxRequestsPerOwner }, kind: count(1)},
	{HCL: "http.max_streams_per_owner",
		Doc:   "run streams and held waits one owner holds open at once (E_TOO_MANY_STREAMS beyond)",
		field: func(c *Config) any { return &c.HTTP.MaxStreamsPerOwner }, kind: count(1)},
	{HCL: "http.read_header_timeout",
		Doc:   "reading a request's headers",
		field: func(c *Config) any { return &c.HTTP.ReadHeaderTimeout }, kind: duration(durationRule{})},
	{HCL: "http.read_timeout",
		Doc:   "reading a whole request, body included",
		field: func(c *Config) any { return &c.HTTP.ReadTimeout }, kind: duration(durationRule{})},
	{HCL: "http.write_timeout",
		Doc:   "answering a request (a long-poll route sets its own bound)",
		field: func(c *Config) any { return &c.HTTP.WriteTimeout }, kind: duration(durationRule{})},

	{HCL: "telemetry.otlp_endpoint", hidesBlock: true, zero: "off (else `OTEL_EXPORTER_OTLP_ENDPOINT`)",
		Doc:   "where run traces are exported over OTLP: a base URL as `OTEL_EXPORTER_OTLP_ENDPOINT` is (its scheme decides TLS; over http `/v1/traces` is added) or host:port",
		field: func(c *Config) any { return &c.Telemetry.Endpoint }, kind: text(checkTelemetryEndpoint)},
	{HCL: "telemetry.protocol",
		Doc:   "OTLP over \"http\" (protobuf) or \"grpc\"",
		field: func(c *Config) any { return &c.Telemetry.Protocol }, kind: text(checkTelemetryProtocol)},
	{HCL: "telemetry.headers", omitEmpty: true, zero: "none (else `OTEL_EXPORTER_OTLP_HEADERS`)",
		Doc:   "headers sent with every export, each a literal or \"env:NAME\" read at load; values are never shown or logged",
		field: func(c *Config) any { return &c.Telemetry.Headers }, kind: headersKind, show: showHeaders},
	{HCL: "telemetry.insecure", omitEmpty: true,
		Doc:   "send to a host:port endpoint without TLS",
		field: func(c *Config) any { return &c.Telemetry.Insecure }, kind: boolKind},
	{HCL: "telemetry.sample",
		Doc:   "fraction of runs traced, 0 to 1, decided by the trace id (the same on every daemon)",
		field: func(c *Config) any { return &c.Telemetry.Sample }, kind: sampleKind},
	{HCL: "telemetry.capture_content", omitEmpty: true,
		Doc:   "export model turns' prompts and answers (gen_ai.input.messages, gen_ai.output.messages); off: they hold users' and tools' data",
		field: func(c *Config) any { return &c.Telemetry.CaptureContent }, kind: boolKind},
	{HCL: "telemetry.service_name",
		Doc:   "the spans' service.name",
		field: func(c *Config) any { return &c.Telemetry.ServiceName }, kind: text(checkTelemetryServiceName)},
}

func init() {
	for _, k := range Knobs {
		if k.JSON == "" {
			k.JSON = k.HCL
		}
	}
}

// KnobByHCL returns the knob with the file key key, or nil.
func KnobByHCL(key string) *Knob {
	for _, k := range Knobs {
		if k.HCL == key {
			return k
		}
	}
	return nil
}

// KnobByFlag returns the knob of weir serve's flag name, or nil.
func KnobByFlag(name string) *Knob {
	for _, k := range Knobs {
		if k.Flag == name {
			return k
		}
	}
	return nil
}

// Unit says what the knob's value is: count, size, duration, string,
// bool, number, headers or mode.
func (k *Knob) Unit() string { return k.kind.unit }

// Field points at the knob's setting in c: an *int, *int64, *string,
// *bool, *float64, *time.Duration, *os.FileMode or *map[string]string.
func (k *Knob) Field(c *Config) any { return k.field(c) }

// Get returns the knob's value in c.
func (k *Knob) Get(c *Config) any { return reflect.ValueOf(k.field(c)).Elem().Interface() }

// String writes the knob's value in c as serve's flags do: "30s", "64".
func (k *Knob) String(c *Config) string { return fmt.Sprint(k.Get(c)) }

// Copy sets the knob in dst to its value in src.
func (k *Knob) Copy(dst, src *Config) {
	reflect.ValueOf(k.field(dst)).Elem().Set(reflect.ValueOf(k.field(src)).Elem())
}

// Check says what is wrong with the knob's value in c when it came from
// elsewhere than the file (a flag): "" if nothing. The file's values are
// checked as they are read.
func (k *Knob) Check(c *Config) string {
	if k.kind.check == nil {
		return ""
	}
	return k.kind.check(k.Get(c))
}

// EngineField names the engine.Config field the knob sets ("": none).
func (k *Knob) EngineField() string {
	if k.engine == nil {
		return ""
	}
	var ec engine.Config
	return fieldName(reflect.ValueOf(&ec).Elem(), reflect.ValueOf(k.engine(&ec)).Pointer())
}

// fieldName finds the field of struct v at address p, as a dotted path.
func fieldName(v reflect.Value, p uintptr) string {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Addr().Pointer() == p && f.Kind() != reflect.Struct {
			return v.Type().Field(i).Name
		}
		if f.Kind() == reflect.Struct {
			if n := fieldName(f, p); n != "" {
				return v.Type().Field(i).Name + "." + n
			}
		}
	}
	return ""
}

// block and attr split the file key: "engine", "lease_timeout".
func (k *Knob) block() string {
	if i := strings.IndexByte(k.HCL, '.'); i >= 0 {
		return k.HCL[:i]
	}
	return ""
}

func (k *Knob) attr() string { return k.HCL[strings.IndexByte(k.HCL, '.')+1:] }

// view is the knob's value in c's view, and whether it is shown.
func (k *Knob) view(c *Config) (any, bool) {
	v := k.Get(c)
	if (k.omitEmpty || k.hidesBlock) && reflect.ValueOf(v).IsZero() {
		return nil, false
	}
	if k.show != nil {
		return k.show(v), true
	}
	if d, ok := v.(time.Duration); ok {
		return d.String(), true
	}
	return v, true
}

// DefaultText is the knob's default as the configuration table writes it.
func (k *Knob) DefaultText() string {
	c := Default()
	v := k.Get(c)
	if reflect.ValueOf(v).IsZero() && k.zero != "" {
		return k.zero
	}
	switch x := v.(type) {
	case time.Duration:
		return durationText(x)
	case os.FileMode:
		return fmt.Sprintf("%q", fmt.Sprintf("%04o", x))
	case string:
		return strconv.Quote(x)
	case int64:
		if k.Unit() == "size" {
			return sizeText(x)
		}
	}
	return fmt.Sprint(v)
}

// durationText writes d as the file does: "30s", "10m", "100ms".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return strconv.Quote(s)
}

// sizeText writes n bytes as the file does: "256MiB".
func sizeText(n int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.Quote(fmt.Sprintf("%d%s", n/u.n, u.name))
		}
	}
	return strconv.Quote(fmt.Sprint(n))
}

// knobTable is the configuration table of docs/operators.md, one row a
// knob (TestDocKnobs keeps the doc current).
func knobTable() string {
	var b strings.Builder
	b.WriteString("| file | flag | environment | view (`--json`) | engine.Config | default | reload | |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	code := func(s, prefix string) string {
		if s == "" {
			return ""
		}
		return "`" + prefix + s + "`"
	}
	for _, k := range Knobs {
		reload := "restart"
		if k.Reload {
			reload = "reload"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", code(k.HCL, ""), code(k.Flag, "--"), code(k.Env, ""),
			code(k.JSON, ""), code(k.EngineField(), ""), k.defaultCell(), reload,
			strings.ReplaceAll(k.Doc, "|", `\|`))
	}
	return b.String()
}

// defaultCell is the knob's default in the table: a value as code, or
// what a zero value means in words.
func (k *Knob) defaultCell() string {
	if reflect.ValueOf(k.Get(Default())).IsZero() && k.zero != "" {
		return k.zero
	}
	return "`" + k.DefaultText() + "`"
}
