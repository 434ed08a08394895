package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/weirhq/weir/internal/escape"
)

// Defaults and bounds of the telemetry block.
const (
	DefaultTelemetryProtocol    = "http"
	DefaultTelemetrySample      = 1.0
	DefaultTelemetryServiceName = "weir"
	// MaxTelemetryHeaders bounds the headers block: a collector needs an
	// authorization header or two, not a page of them.
	MaxTelemetryHeaders = 32
	// MaxTelemetryHeaderBytes bounds one header's value, as resolved.
	MaxTelemetryHeaderBytes = 8 << 10
	// maxTelemetryText bounds the endpoint and the service name.
	maxTelemetryText = 2048
)

// otlpEndpointEnvs are the standard variables that name where the OTLP
// exporter sends traces; either turns tracing on without a file block.
var otlpEndpointEnvs = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// Telemetry is the telemetry block: where the run traces built from the
// journal are exported over OTLP. With no endpoint here and none in the
// standard OTEL_EXPORTER_OTLP_* variables tracing is off and costs
// nothing; what the block leaves out the exporter reads from those
// variables, as every OpenTelemetry SDK does.
type Telemetry struct {
	// Endpoint is the collector's OTLP endpoint: a URL
	// ("https://collector:4318", its scheme deciding TLS) or host:port
	// (TLS unless Insecure). "": the variables', else off.
	Endpoint string `json:"otlp_endpoint,omitempty"`
	// Protocol is "http" (OTLP/HTTP protobuf) or "grpc".
	Protocol string `json:"protocol"`
	// Headers are sent with every export, as written in the file: a
	// literal value or "env:NAME", read from weir's environment at load.
	// The view shows only the names and where each value comes from;
	// values are never logged.
	Headers map[string]string `json:"-"`
	// Insecure sends to a host:port endpoint without TLS.
	Insecure bool `json:"insecure,omitempty"`
	// Sample is the fraction of runs traced, 0 to 1, chosen from the
	// trace id so every daemon decides the same for a run.
	Sample float64 `json:"sample"`
	// ServiceName is the service.name resource attribute of the spans.
	ServiceName string `json:"service_name"`
	// CaptureContent exports model turns' messages on their spans (the
	// GenAI conventions' gen_ai.input.messages and gen_ai.output.messages).
	// Off by default: prompts and answers hold what users and tools said,
	// and a trace backend keeps them longer and shows them to more people
	// than weir does. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
	// turns it on when the file does not.
	CaptureContent bool `json:"capture_content,omitempty"`

	// headerValues are Headers resolved (each env:NAME read).
	headerValues map[string]string
}

// On reports whether traces are exported: an endpoint in the file or in
// the standard variables.
func (t *Telemetry) On() bool {
	if t.Endpoint != "" {
		return true
	}
	for _, e := range otlpEndpointEnvs {
		if os.Getenv(e) != "" {
			return true
		}
	}
	return false
}

// HeaderValues returns the headers to send, each env:NAME resolved at
// load. The values are secrets: pass them to the exporter, nowhere else.
func (t *Telemetry) HeaderValues() map[string]string {
	out := make(map[string]string, len(t.headerValues))
	for k, v := range t.headerValues {
		out[k] = v
	}
	return out
}

// headerName is an HTTP header field name (RFC 9110's token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")

func checkTelemetryEndpoint(d *decoder, expr hcl.Expression, s string) {
	bad := func(why string) {
		d.fail(expr.Range(), "telemetry otlp_endpoint: %s (write a URL such as \"https://collector:4318\", or host:port)", why)
	}
	switch {
	case len(s) > maxTelemetryText:
		bad(fmt.Sprintf("%d bytes; at most %d", len(s), maxTelemetryText))
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		switch {
		case err != nil:
			bad("not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			bad(fmt.Sprintf("scheme %q is neither http nor https", u.Scheme))
		case u.Host == "":
			bad("names no host")
		case u.User != nil:
			bad("holds credentials; send them in a header instead")
		}
	default:
		if _, _, err := net.SplitHostPort(s); err != nil {
			bad(fmt.Sprintf("%q is neither a URL nor host:port", s))
		}
	}
}

func checkTelemetryProtocol(d *decoder, expr hcl.Expression, s string) {
	if s != "http" && s != "grpc" {
		d.fail(expr.Range(), "telemetry protocol must be \"http\" or \"grpc\", got %q", s)
	}
}

func checkTelemetryServiceName(d *decoder, expr hcl.Expression, s string) {
	if s == "" || len(s) > 255 {
		d.fail(expr.Range(), "telemetry service_name must be 1 to 255 bytes, got %d", len(s))
	}
}

var sampleKind = kind{unit: "number", decode: func(d *decoder, name string, expr hcl.Expression, _ *Config, dst any) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		d.problems = append(d.problems, diagError(diags).Problems...)
		return
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		d.fail(expr.Range(), "%s must be a number from 0 to 1", name)
		return
	}
	f, _ := v.AsBigFloat().Float64()
	if f < 0 || f > 1 {
		d.fail(expr.Range(), "%s must be from 0 to 1, got %g", name, f)
		return
	}
	*dst.(*float64) = f
}}

// headersKind reads the headers map: each value a literal or env:NAME,
// resolved here so a missing secret refuses the load rather than the
// first export. No message quotes a value.
var headersKind = kind{unit: "headers", decode: func(d *decoder, name string, expr hcl.Expression, c *Config, dst any) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		d.problems = append(d.problems, diagError(diags).Problems...)
		return
	}
	if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		d.fail(expr.Range(), "telemetry %s must be a map of header names to values, e.g. { Authorization = \"env:OTLP_TOKEN\" }", name)
		return
	}
	if v.LengthInt() > MaxTelemetryHeaders {
		d.fail(expr.Range(), "telemetry %s has %d entries; at most %d", name, v.LengthInt(), MaxTelemetryHeaders)
		return
	}
	spec, resolved := map[string]string{}, map[string]string{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		h := k.AsString()
		if !headerName.MatchString(h) {
			d.fail(expr.Range(), "telemetry %s: %q is not a header name", name, escape.Cut(h, 64))
			continue
		}
		if e.IsNull() || e.Type() != cty.String {
			d.fail(expr.Range(), "telemetry %s: %s must be a string (a value, or \"env:NAME\")", name, h)
			continue
		}
		s := e.AsString()
		val := s
		if env, ok := strings.CutPrefix(s, "env:"); ok {
			if !envName.MatchString(env) {
				d.fail(expr.Range(), "telemetry %s: %s: %q is not a variable name", name, h, escape.Cut(env, 64))
				continue
			}
			val = os.Getenv(env)
			if val == "" {
				d.fail(expr.Range(), "telemetry %s: %s names %s, which is not set in weir's environment", name, h, env)
				continue
			}
		}
		switch {
		case len(val) > MaxTelemetryHeaderBytes:
			d.fail(expr.Range(), "telemetry %s: %s's value is %d bytes; at most %d", name, h, len(val), MaxTelemetryHeaderBytes)
		case strings.ContainsAny(val, "\r\n\x00"):
			d.fail(expr.Range(), "telemetry %s: %s's value holds a line break or NUL", name, h)
		default:
			spec[h], resolved[h] = s, val
		}
	}
	*dst.(*map[string]string) = spec
	c.Telemetry.headerValues = resolved
}}

// showHeaders is the headers in the view: each name with where its value
// comes from, never the value.
func showHeaders(v any) any {
	m := v.(map[string]string)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &object{}
	for _, n := range names {
		src := "(literal, not shown)"
		if strings.HasPrefix(m[n], "env:") {
			src = m[n]
		}
		out.set([]string{n}, src)
	}
	return out
}

// checkTelemetry checks what the telemetry block's attributes say
// together.
func (d *decoder) checkTelemetry(b *hcl.Block, exprs map[string]hcl.Expression, c *Config) {
	if b == nil {
		return
	}
	t := &c.Telemetry
	if !t.On() {
		d.fail(b.DefRange, "the telemetry block needs an otlp_endpoint, e.g. \"https://collector:4318\" (or OTEL_EXPORTER_OTLP_ENDPOINT in weir's environment)")
	}
	if t.Insecure && strings.HasPrefix(t.Endpoint, "https://") {
		d.fail(exprs["telemetry.insecure"].Range(), "telemetry insecure = true contradicts the https:// endpoint; write http:// to send without TLS")
	}
}
