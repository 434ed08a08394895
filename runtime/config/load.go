package config

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/tlscert"
)

// MaxFileSize bounds a config file: it is settings, not data.
const MaxFileSize = 1 << 20

// The file's schema: the blocks whose structure is their own (listeners
// with tokens, plugin sections), decoded here, and the rest, the knobs'
// attributes and blocks, whose schema is made from Knobs. Attributes
// are kept as expressions so that each value is checked with its own
// position.
type rawFile struct {
	TCP     *rawTCP      `hcl:"tcp,block"`
	Console *rawConsole  `hcl:"console,block"`
	Plugins []*rawPlugin `hcl:"plugin,block"`
	// Owners and DefaultOwner are the owner blocks (owners.go).
	Owners       []*rawOwner      `hcl:"owner,block"`
	DefaultOwner *rawDefaultOwner `hcl:"default_owner,block"`
	// Hooks are the hook blocks (hooks.go).
	Hooks []*rawHook `hcl:"hook,block"`
	// Knobs is the rest of the file (knobSchema).
	Knobs hcl.Body `hcl:",remain"`
}

type rawTCP struct {
	Address     hcl.Expression `hcl:"address,optional"`
	AllowRemote hcl.Expression `hcl:"allow_remote,optional"`
	Tokens      []*rawToken    `hcl:"token,block"`
	TLS         *rawTLS        `hcl:"tls,block"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

// rawTLS is a listener's tls block; any listener block may hold one.
type rawTLS struct {
	CertFile hcl.Expression `hcl:"cert_file,optional"`
	KeyFile  hcl.Expression `hcl:"key_file,optional"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type rawConsole struct {
	Address     hcl.Expression `hcl:"address,optional"`
	AllowRemote hcl.Expression `hcl:"allow_remote,optional"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

type rawToken struct {
	Owner      string         `hcl:"owner,label"`
	Secret     hcl.Expression `hcl:"secret,optional"`
	SecretFile hcl.Expression `hcl:"secret_file,optional"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawPlugin struct {
	Name     string    `hcl:"name,label"`
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

// Load reads and validates the config file at path. Its error is an
// *Error listing every problem with its file:line.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Problems: []string{err.Error()}}
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{Problems: []string{fmt.Sprintf("%s: %v", path, err)}}
	}
	if len(src) > MaxFileSize {
		return nil, &Error{Problems: []string{fmt.Sprintf("%s: larger than %d bytes", path, MaxFileSize)}}
	}
	c, err := Parse(src, path)
	if err != nil {
		return nil, err
	}
	if c.inlineSecret {
		if fi, err := f.Stat(); err == nil {
			if w := secretReadableByOthers(fi.Mode(), path+": the file holds a token's secret", tokenRisk); w != "" {
				c.Warnings = append(c.Warnings, w)
			}
		}
	}
	return c, nil
}

// secretReadableByOthers is the warning for a file holding a secret that
// its group or other users may read or write, as ssh refuses a private
// key with any of the bits 077: whoever reads it can do what risk says
// (act as a token's owner, sign a hook's deliveries). "" if only the
// file's owner has access (or the platform has no such modes).
func secretReadableByOthers(mode fs.FileMode, what, risk string) string {
	if goruntime.GOOS == "windows" || mode.Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("%s and is open to others (mode %04o, not 0600): whoever reads it can %s (chmod 600 it)",
		what, mode.Perm(), risk)
}

// tokenRisk is what a reader of a token's secret can do.
const tokenRisk = "act as the token's owner"

// Parse validates src, the content of the config file filename. Relative
// paths in it (secret_file) are taken from filename's directory.
func Parse(src []byte, filename string) (*Config, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	// A schema error (an unknown attribute, say) does not stop the checks
	// of the values that were decoded: the operator sees every problem at
	// once.
	var raw rawFile
	diags = gohcl.DecodeBody(file.Body, nil, &raw)
	fillNull(reflect.ValueOf(&raw).Elem())
	d := &decoder{dir: filepath.Dir(filename)}
	d.problems = diagError(diags).Problems
	c := d.resolve(&raw)
	c.Warnings, c.inlineSecret = d.warnings, d.inlineSecret
	if len(d.problems) > 0 {
		sortProblems(d.problems)
		return nil, &Error{Problems: d.problems}
	}
	c.File = filename
	return c, nil
}

var exprType = reflect.TypeOf((*hcl.Expression)(nil)).Elem()

// fillNull gives every attribute a decode left unset the value of an
// absent one, so the checks need not tell the two apart.
func fillNull(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fillNull(v.Elem())
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			fillNull(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Type() == exprType && f.IsNil() {
				f.Set(reflect.ValueOf(hcl.StaticExpr(cty.NullVal(cty.DynamicPseudoType), hcl.Range{})))
				continue
			}
			fillNull(f)
		}
	}
}

// sortProblems orders problems by file and line, keeping the order of
// those on one line.
func sortProblems(ps []string) {
	line := func(p string) int {
		parts := strings.SplitN(p, ":", 3)
		if len(parts) < 3 {
			return 0
		}
		n, _ := strconv.Atoi(parts[1])
		return n
	}
	sort.SliceStable(ps, func(i, j int) bool { return line(ps[i]) < line(ps[j]) })
}

func diagError(diags hcl.Diagnostics) *Error {
	e := &Error{}
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		e.Problems = append(e.Problems, at(d.Subject)+msg)
	}
	return e
}

// at formats a position as "file:line: ".
func at(r *hcl.Range) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%s:%d: ", r.Filename, r.Start.Line)
}

// decoder resolves the raw file into a Config, collecting every problem.
type decoder struct {
	dir      string
	problems []string
	warnings []string
	// inlineSecret: a token's secret is written in the file itself.
	inlineSecret bool
}

func (d *decoder) fail(r hcl.Range, format string, args ...any) {
	d.problems = append(d.problems, at(&r)+fmt.Sprintf(format, args...))
}

// value evaluates expr with no variables or functions: a config file holds
// constants. It reports false if the attribute is absent or wrong.
func (d *decoder) value(expr hcl.Expression, name string, dst any) bool {
	if expr == nil {
		return false
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		d.problems = append(d.problems, diagError(diags).Problems...)
		return false
	}
	if v.IsNull() {
		return false
	}
	if diags := gohcl.DecodeExpression(expr, nil, dst); diags.HasErrors() {
		d.fail(expr.Range(), "%s: %s", name, diags[0].Detail)
		return false
	}
	return true
}

func (d *decoder) intAttr(expr hcl.Expression, name string, dst *int, min int) {
	n := int64(*dst)
	d.int64Attr(expr, name, &n, int64(min))
	*dst = int(n)
}

// int64Attr reads a whole number of at least min, at most 2^53 (what an
// HCL number holds exactly).
func (d *decoder) int64Attr(expr hcl.Expression, name string, dst *int64, min int64) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		d.problems = append(d.problems, diagError(diags).Problems...)
		return
	}
	if v.IsNull() {
		return
	}
	if !v.IsKnown() || v.Type() != cty.Number {
		d.fail(expr.Range(), "%s must be a number", name)
		return
	}
	f := v.AsBigFloat()
	n, acc := f.Int64()
	switch {
	case !f.IsInt():
		d.fail(expr.Range(), "%s must be a whole number, got %s", name, f.Text('g', 10))
	case acc != big.Exact || n > 1<<53 || n < -(1<<53):
		d.fail(expr.Range(), "%s is too large: %s", name, f.Text('g', 10))
	case n < min:
		d.fail(expr.Range(), "%s must be at least %d, got %d", name, min, n)
	default:
		*dst = n
	}
}

// durationRule says what a duration attribute admits besides a positive
// duration; the zero rule admits nothing else.
type durationRule struct {
	// allowZero admits "0" and "0s".
	allowZero bool
	// none, if not "", is a word that stands for noneValue.
	none      string
	noneValue time.Duration
}

// durationAttr reads a duration written as flows write them ("30s", "10m",
// "2h", "30d"), within rule.
func (d *decoder) durationAttr(expr hcl.Expression, name string, dst *time.Duration, rule durationRule) {
	var s string
	if !d.value(expr, name, &s) {
		return
	}
	if rule.none != "" && s == rule.none {
		*dst = rule.noneValue
		return
	}
	if rule.allowZero && (s == "0" || s == "0s") {
		*dst = 0
		return
	}
	v, err := flows.ParseDuration(s)
	if err != nil {
		d.fail(expr.Range(), "%s: %v", name, err)
		return
	}
	if v <= 0 {
		d.fail(expr.Range(), "%s must be positive, got %q", name, s)
		return
	}
	*dst = v
}

// absent reports whether an optional attribute was left out.
func absent(expr hcl.Expression) bool {
	v, diags := expr.Value(nil)
	return !diags.HasErrors() && v.IsNull()
}

func (d *decoder) stringAttr(expr hcl.Expression, name string, dst *string) bool {
	var s string
	if !d.value(expr, name, &s) {
		return false
	}
	*dst = s
	return true
}

var logLevels = map[string]bool{"trace": true, "debug": true, "info": true, "warn": true, "error": true}

// ownerName is what an owner may be called: it is compared with OS user
// names and shown in audit events.
var ownerName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,127}$`)

// pluginName matches the names plugins are installed under.
var pluginName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func (d *decoder) resolve(raw *rawFile) *Config {
	c := Default()
	d.knobs(raw.Knobs, c)
	if t := raw.TCP; t != nil {
		c.TCP = d.tcp(t)
	}
	if cb := raw.Console; cb != nil {
		c.Console = d.console(cb, raw.TCP != nil)
	}
	for _, p := range raw.Plugins {
		d.plugin(p, c)
	}
	d.owners(raw, c)
	d.hooks(raw.Hooks, c)
	return c
}

// knobSchema is the schema of the knobs in block ("": the top level:
// its attributes and the knobs' blocks).
func knobSchema(block string) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	seen := map[string]bool{}
	for _, k := range Knobs {
		switch b := k.block(); {
		case b == block:
			s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: k.attr()})
		case block == "" && !seen[b]:
			seen[b] = true
			s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: b})
		}
	}
	return s
}

// knobs reads every knob the file sets into c, each checked by its kind.
func (d *decoder) knobs(body hcl.Body, c *Config) {
	if body == nil {
		return
	}
	content, diags := body.Content(knobSchema(""))
	d.problems = append(d.problems, diagError(diags).Problems...)
	exprs := map[string]hcl.Expression{}
	for name, a := range content.Attributes {
		exprs[name] = a.Expr
	}
	blocks := map[string]*hcl.Block{}
	for _, b := range content.Blocks {
		if first, dup := blocks[b.Type]; dup {
			d.fail(b.DefRange, "Duplicate %s block: Only one %s block is allowed. Another was defined at %s.", b.Type, b.Type, first.DefRange)
			continue
		}
		blocks[b.Type] = b
		bc, diags := b.Body.Content(knobSchema(b.Type))
		d.problems = append(d.problems, diagError(diags).Problems...)
		for name, a := range bc.Attributes {
			exprs[b.Type+"."+name] = a.Expr
		}
	}
	for _, k := range Knobs {
		expr, set := exprs[k.HCL]
		set = set && !absent(expr)
		if b := blocks[k.block()]; !set && b != nil && k.missing != "" {
			d.fail(b.DefRange, "%s", k.missing)
		}
		if set {
			k.kind.decode(d, k.attr(), expr, c, k.field(c))
		}
	}
	d.checkTelemetry(blocks["telemetry"], exprs, c)
	if blocks["engine"] != nil && c.Engine.RetryBase > c.Engine.RetryMax {
		at, ok := exprs["engine.retry_base"]
		if !ok {
			at = exprs["engine.retry_max"]
		}
		d.fail(at.Range(), "retry_base (%s) is longer than retry_max (%s)", c.Engine.RetryBase, c.Engine.RetryMax)
	}
}

// lookupGroup resolves a group name or number.
func lookupGroup(g string) (int, error) {
	if n, err := strconv.Atoi(g); err == nil && n >= 0 {
		return n, nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(grp.Gid)
}

func (d *decoder) tcp(t *rawTCP) *TCP {
	out := &TCP{Address: DefaultTCPAddress}
	d.value(t.AllowRemote, "allow_remote", &out.AllowRemote)
	if t.TLS != nil {
		out.TLS = d.tls(t.TLS, "tcp")
	}
	if d.stringAttr(t.Address, "address", &out.Address) {
		host, _, err := net.SplitHostPort(out.Address)
		if err != nil {
			d.fail(t.Address.Range(), "tcp address %q: %v (write host:port, e.g. %q)", out.Address, err, DefaultTCPAddress)
		} else if !loopback(host) && !out.AllowRemote && t.TLS == nil {
			d.fail(t.Address.Range(), "tcp address %q is not loopback: bearer tokens would cross the network in the clear; add a tls { cert_file, key_file } block, or set allow_remote = true to bind it anyway (behind TLS termination)", out.Address)
		}
	}
	if len(t.Tokens) == 0 {
		d.fail(t.DefRange, "the tcp block declares no token: every request on it would be refused (add token \"OWNER\" { secret_file = ... })")
	}
	seen := map[string]string{}
	for _, rt := range t.Tokens {
		tok, ok := d.token(rt)
		if !ok {
			continue
		}
		if prev, dup := seen[tok.Secret]; dup {
			d.fail(rt.DefRange, "token of %q has the same secret as the token at %s: one secret must name one owner", tok.Owner, prev)
			continue
		}
		seen[tok.Secret] = strings.TrimSuffix(tok.Where, ": ")
		out.Tokens = append(out.Tokens, tok)
	}
	return out
}

// tls reads a listener's tls block (of the block named in): both files
// are required, relative paths are taken from the config file's
// directory, and the pair must load and be valid now, so a daemon never
// starts (or reloads) with a certificate it cannot present.
func (d *decoder) tls(t *rawTLS, in string) *TLS {
	out := &TLS{}
	for _, f := range []struct {
		expr hcl.Expression
		name string
		dst  *string
	}{{t.CertFile, "cert_file", &out.CertFile}, {t.KeyFile, "key_file", &out.KeyFile}} {
		if !d.stringAttr(f.expr, f.name, f.dst) || *f.dst == "" {
			d.fail(t.DefRange, "the %s tls block needs %s (a PEM file)", in, f.name)
			return nil
		}
		if !filepath.IsAbs(*f.dst) {
			*f.dst = filepath.Join(d.dir, *f.dst)
		}
	}
	if _, err := tlscert.Read(out.CertFile, out.KeyFile); err != nil {
		d.fail(t.DefRange, "%s tls: %v", in, err)
		return nil
	}
	return out
}

// console reads the console block. Its sign-in takes the tcp block's
// tokens, so a console without a tcp block could admit nobody.
func (d *decoder) console(cb *rawConsole, hasTCP bool) *Console {
	out := &Console{Address: DefaultConsoleAddress}
	if !hasTCP {
		d.fail(cb.DefRange, "the console block needs a tcp block: its tokens are the console's sign-in (add tcp { token \"OWNER\" { secret_file = ... } })")
	}
	d.value(cb.AllowRemote, "allow_remote", &out.AllowRemote)
	if d.stringAttr(cb.Address, "address", &out.Address) {
		host, _, err := net.SplitHostPort(out.Address)
		if err != nil {
			d.fail(cb.Address.Range(), "console address %q: %v (write host:port, e.g. %q)", out.Address, err, DefaultConsoleAddress)
		} else if !loopback(host) && !out.AllowRemote {
			d.fail(cb.Address.Range(), "console address %q is not loopback: sign-in tokens and session cookies would cross the network in the clear; set allow_remote = true to bind it anyway (behind TLS termination)", out.Address)
		}
	}
	return out
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (d *decoder) token(rt *rawToken) (Token, bool) {
	tok := Token{Owner: rt.Owner, Where: strings.TrimSuffix(at(&rt.DefRange), " ")}
	tok.Where = strings.TrimSuffix(tok.Where, ":")
	if !ownerName.MatchString(rt.Owner) {
		d.fail(rt.DefRange, "token owner %q: an owner is 1-128 letters, digits and _ . @ -, starting with a letter, digit or _", rt.Owner)
		return tok, false
	}
	var secret, file string
	hasSecret := d.stringAttr(rt.Secret, "secret", &secret)
	hasFile := d.stringAttr(rt.SecretFile, "secret_file", &file)
	switch {
	case hasSecret == hasFile:
		d.fail(rt.DefRange, "token of %q needs exactly one of secret or secret_file", rt.Owner)
		return tok, false
	case hasFile:
		if !filepath.IsAbs(file) {
			file = filepath.Join(d.dir, file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			d.fail(rt.SecretFile.Range(), "token of %q: %v", rt.Owner, err)
			return tok, false
		}
		secret = strings.TrimSpace(string(b))
		if fi, err := os.Stat(file); err == nil {
			if w := secretReadableByOthers(fi.Mode(), fmt.Sprintf("%stoken of %q: secret_file %s", at(rt.SecretFile.Range().Ptr()), rt.Owner, file), tokenRisk); w != "" {
				d.warnings = append(d.warnings, w)
			}
		}
	default:
		d.inlineSecret = true
	}
	if len(secret) < MinTokenLength {
		r := rt.Secret.Range()
		if hasFile {
			r = rt.SecretFile.Range()
		}
		d.fail(r, "token of %q is %d characters; a token needs at least %d (e.g. openssl rand -hex 32)", rt.Owner, len(secret), MinTokenLength)
		return tok, false
	}
	if strings.ContainsAny(secret, " \t\r\n") {
		d.fail(rt.DefRange, "token of %q contains white space, which an Authorization header cannot carry", rt.Owner)
		return tok, false
	}
	tok.Secret = secret
	return tok, true
}

func (d *decoder) plugin(p *rawPlugin, c *Config) {
	if !pluginName.MatchString(p.Name) {
		d.fail(p.DefRange, "plugin %q: not a plugin name (lower-case letters, digits, _ and -)", p.Name)
		return
	}
	if _, dup := c.Plugins[p.Name]; dup {
		d.fail(p.DefRange, "plugin %q has two sections", p.Name)
		return
	}
	attrs, diags := p.Body.JustAttributes()
	if diags.HasErrors() {
		d.problems = append(d.problems, diagError(diags).Problems...)
		return
	}
	obj := map[string]json.RawMessage{}
	hostKeys := PluginHost{}
	where := map[string]string{}
	for name, a := range attrs {
		switch name {
		case "env":
			hostKeys.Env = d.pluginEnv(p.Name, a)
			continue
		case "memory_max":
			hostKeys.MemoryMax = d.pluginMemory(p.Name, a)
			continue
		}
		where[name] = strings.TrimSuffix(at(&a.Range), ": ")
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			d.problems = append(d.problems, diagError(diags).Problems...)
			continue
		}
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			d.fail(a.Range, "plugin %q: %s: %v", p.Name, name, err)
			continue
		}
		obj[name] = b
	}
	b, err := json.Marshal(obj) // keys sorted: the same section hashes the same
	if err != nil {
		d.fail(p.DefRange, "plugin %q: %v", p.Name, err)
		return
	}
	if c.Plugins == nil {
		c.Plugins = map[string]json.RawMessage{}
	}
	c.Plugins[p.Name] = b
	if len(hostKeys.Env) > 0 || hostKeys.MemoryMax > 0 {
		if c.PluginHost == nil {
			c.PluginHost = map[string]PluginHost{}
		}
		c.PluginHost[p.Name] = hostKeys
	}
	if c.pluginWhere == nil {
		c.pluginWhere = map[string]pluginPos{}
	}
	c.pluginWhere[p.Name] = pluginPos{block: strings.TrimSuffix(at(&p.DefRange), ": "), keys: where}
}

// envName is what a variable listed in a plugin block's env may be called.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxPluginEnv bounds the variables one plugin block may pass.
const MaxPluginEnv = 64

// MinMemoryMax is the smallest memory_max accepted: below it a Go plugin
// cannot start, and the refusal is clearer here than as a crash.
const MinMemoryMax = 32 << 20

// pluginEnv reads a plugin block's env: names of variables of the daemon's
// environment, each of which must be set (a key silently absent is worse
// than a refused start). Values are never read into the config.
func (d *decoder) pluginEnv(plugin string, a *hcl.Attribute) []string {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		d.problems = append(d.problems, diagError(diags).Problems...)
		return nil
	}
	if v.IsNull() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		d.fail(a.Range, "plugin %q: env must be a list of variable names, e.g. [\"API_KEY\"]", plugin)
		return nil
	}
	if v.LengthInt() > MaxPluginEnv {
		d.fail(a.Range, "plugin %q: env lists %d variables; at most %d", plugin, v.LengthInt(), MaxPluginEnv)
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			d.fail(a.Range, "plugin %q: env must be a list of variable names (strings)", plugin)
			return nil
		}
		name := e.AsString()
		switch {
		case !envName.MatchString(name):
			d.fail(a.Range, "plugin %q: env: %q is not a variable name (letters, digits and _, not starting with a digit)", plugin, name)
		case seen[name]:
			d.fail(a.Range, "plugin %q: env lists %q twice", plugin, name)
		case !hasEnv(name):
			d.fail(a.Range, "plugin %q: env lists %s, which is not set in weir's environment", plugin, name)
		default:
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func hasEnv(name string) bool {
	_, ok := os.LookupEnv(name)
	return ok
}

// MinMemoryLimit is the smallest memory_limit accepted: below it the
// daemon would spend its time collecting garbage.
const MinMemoryLimit = 64 << 20

// MinSandboxMemory is the smallest sandbox memory accepted: a worker needs
// room for its runtime and an evaluator.
const MinSandboxMemory = 64 << 20

// size reads a size attribute such as "2GiB" of at least min bytes.
func (d *decoder) size(expr hcl.Expression, name string, min int64) int64 {
	var s string
	if !d.value(expr, name, &s) {
		return 0
	}
	n, err := ParseSize(s)
	switch {
	case err != nil:
		d.fail(expr.Range(), "%s: %v", name, err)
		return 0
	case n < min:
		d.fail(expr.Range(), "%s %q is below the minimum of %dMiB", name, s, min>>20)
		return 0
	}
	return n
}

// pluginMemory reads a plugin block's memory_max, a size such as "512MiB".
func (d *decoder) pluginMemory(plugin string, a *hcl.Attribute) int64 {
	var s string
	if !d.value(a.Expr, "memory_max", &s) {
		return 0
	}
	n, err := ParseSize(s)
	switch {
	case err != nil:
		d.fail(a.Range, "plugin %q: memory_max: %v", plugin, err)
		return 0
	case n < MinMemoryMax:
		d.fail(a.Range, "plugin %q: memory_max %q is below the minimum of 32MiB a plugin needs to start", plugin, s)
		return 0
	}
	return n
}

var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
}

var sizeRE = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)

// ParseSize reads a size in bytes written as a whole number with an
// optional unit: B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB,
// TB (powers of 1000).
func ParseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size (write e.g. \"512MiB\" or \"2GiB\")", s)
	}
	unit, ok := sizeUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s, m[2])
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > (1<<62)/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}
