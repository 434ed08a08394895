package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/weirhq/weir/runtime/internal/hooks"
)

// Hook blocks: `hook "github" { secret_file = ..., signature = "github",
// event = "github", event_header = "X-GitHub-Event", id_header =
// "X-GitHub-Delivery", key = "/repository/full_name" }` serves POST
// /v1/hooks/github (package hooks). Like owner blocks they are many per
// file and keyed by a label, so they are not knobs. What a Hook may hold
// is checked once, by Hook.Check; the decoder reads the block, reads the
// secret file, and places each problem at its key's line. A reload reads
// every secret file again, so rotating a secret is a reload.

// rawHook is a hook block.
type rawHook struct {
	Name            string         `hcl:"name,label"`
	Owner           hcl.Expression `hcl:"owner,optional"`
	SecretFile      hcl.Expression `hcl:"secret_file,optional"`
	Signature       hcl.Expression `hcl:"signature,optional"`
	SignatureHeader hcl.Expression `hcl:"signature_header,optional"`
	Tolerance       hcl.Expression `hcl:"tolerance,optional"`
	Event           hcl.Expression `hcl:"event,optional"`
	EventHeader     hcl.Expression `hcl:"event_header,optional"`
	IDHeader        hcl.Expression `hcl:"id_header,optional"`
	IDKey           hcl.Expression `hcl:"id_key,optional"`
	Key             hcl.Expression `hcl:"key,optional"`
	MaxBody         hcl.Expression `hcl:"max_body,optional"`
	DefRange        hcl.Range      `hcl:",def_range"`
}

// hooks reads the hook blocks into c.Hooks, in the file's order.
func (d *decoder) hooks(raw []*rawHook, c *Config) {
	seen := map[string]string{}
	for _, rh := range raw {
		if err := hooks.CheckName(rh.Name); err != nil {
			d.fail(rh.DefRange, "%v", err)
			continue
		}
		if prev, dup := seen[rh.Name]; dup {
			d.fail(rh.DefRange, "hook %q has two blocks (the other at %s)", rh.Name, prev)
			continue
		}
		seen[rh.Name] = strings.TrimSuffix(at(&rh.DefRange), ": ")
		if hk, ok := d.hook(rh); ok {
			c.Hooks = append(c.Hooks, hk)
		}
	}
}

// hook reads one block; false if anything in it is wrong (each problem
// recorded).
func (d *decoder) hook(rh *rawHook) (hooks.Hook, bool) {
	before := len(d.problems)
	what := fmt.Sprintf("hook %q", rh.Name)
	hk := hooks.Hook{Name: rh.Name}
	if d.stringAttr(rh.Owner, "owner", &hk.Owner) && !ownerName.MatchString(hk.Owner) {
		d.fail(rh.Owner.Range(), "%s: owner %q: an owner is 1-128 letters, digits and _ . @ -, starting with a letter, digit or _", what, hk.Owner)
	}
	var scheme string
	for _, req := range []struct {
		expr      hcl.Expression
		name, why string
		dst       *string
	}{
		{rh.Signature, "signature", "the provider's signature scheme: github, stripe or hmac-sha256", &scheme},
		{rh.Event, "event", "the name of the events it makes, e.g. \"github.push\"", &hk.Event},
		{rh.SecretFile, "secret_file", "the file holding the secret deliveries are signed with", &hk.SecretFile},
	} {
		if absent(req.expr) {
			d.fail(rh.DefRange, "%s needs %s (%s)", what, req.name, req.why)
			continue
		}
		d.stringAttr(req.expr, req.name, req.dst)
	}
	hk.Scheme = hooks.Scheme(scheme)
	for _, opt := range []struct {
		expr hcl.Expression
		name string
		dst  *string
	}{
		{rh.SignatureHeader, "signature_header", &hk.SignatureHeader},
		{rh.EventHeader, "event_header", &hk.EventHeader},
		{rh.IDHeader, "id_header", &hk.IDHeader},
		{rh.IDKey, "id_key", &hk.IDKey},
		{rh.Key, "key", &hk.Key},
	} {
		d.stringAttr(opt.expr, opt.name, opt.dst)
	}
	d.durationAttr(rh.Tolerance, "tolerance", &hk.Tolerance, durationRule{})
	if !absent(rh.MaxBody) {
		hk.MaxBody = d.size(rh.MaxBody, "max_body", 0)
	}
	if hk.SecretFile != "" {
		hk.Secret = d.hookSecret(rh, &hk.SecretFile, what)
	}
	if len(d.problems) > before {
		return hk, false // Check would repeat what is already said
	}
	for _, p := range hk.Check() {
		d.fail(hookKeyRange(rh, p.Key), "%s: %s", what, p.Message)
	}
	return hk, len(d.problems) == before
}

// hookKeyRange is where a Check problem's key is written (the block if
// it is not).
func hookKeyRange(rh *rawHook, key string) hcl.Range {
	expr := map[string]hcl.Expression{
		"signature": rh.Signature, "secret": rh.SecretFile, "signature_header": rh.SignatureHeader,
		"tolerance": rh.Tolerance, "event": rh.Event, "event_header": rh.EventHeader,
		"id_header": rh.IDHeader, "id_key": rh.IDKey, "key": rh.Key, "max_body": rh.MaxBody,
	}[key]
	if expr == nil || absent(expr) {
		return rh.DefRange
	}
	return expr.Range()
}

// hookSecret reads a hook's secret file (relative paths from the config
// file's directory): refused if missing, empty or larger than a secret
// is; one trailing newline, as editors and echo write, is not part of
// it. A file others may read is a warning, as with tokens.
func (d *decoder) hookSecret(rh *rawHook, file *string, what string) []byte {
	if !filepath.IsAbs(*file) {
		*file = filepath.Join(d.dir, *file)
	}
	r := rh.SecretFile.Range()
	f, err := os.Open(*file)
	if err != nil {
		d.fail(r, "%s: secret_file: %v", what, err)
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, hooks.MaxSecretBytes+2))
	if err != nil {
		d.fail(r, "%s: secret_file %s: %v", what, *file, err)
		return nil
	}
	b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
	switch {
	case len(b) == 0:
		d.fail(r, "%s: secret_file %s is empty: a hook's secret is what proves a delivery comes from its provider", what, *file)
		return nil
	case len(b) > hooks.MaxSecretBytes:
		d.fail(r, "%s: secret_file %s is larger than %d bytes: it holds a secret, not data", what, *file, hooks.MaxSecretBytes)
		return nil
	}
	if fi, err := f.Stat(); err == nil {
		if w := secretReadableByOthers(fi.Mode(), fmt.Sprintf("%s%s: secret_file %s", at(&r), what, *file), "sign deliveries as the hook's provider"); w != "" {
			d.warnings = append(d.warnings, w)
		}
	}
	return b
}

// hookView is a hook as the config view shows it: durations and sizes as
// the file writes them, the secret left out.
func hookView(hk hooks.Hook) *object {
	v := &object{}
	for _, kv := range []struct{ k, v string }{
		{"name", hk.Name}, {"owner", hk.Owner}, {"secret_file", hk.SecretFile}, {"signature", string(hk.Scheme)},
		{"signature_header", hk.SignatureHeader}, {"event", hk.Event}, {"event_header", hk.EventHeader},
		{"id_header", hk.IDHeader}, {"id_key", hk.IDKey}, {"key", hk.Key},
	} {
		if kv.v != "" {
			v.set([]string{kv.k}, kv.v)
		}
	}
	if hk.Tolerance != 0 {
		v.set([]string{"tolerance"}, hk.Tolerance.String())
	}
	if hk.MaxBody != 0 {
		v.set([]string{"max_body"}, strings.Trim(sizeText(hk.MaxBody), `"`))
	}
	return v
}
