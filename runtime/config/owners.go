package config

import (
	"fmt"
	"os/user"
	"reflect"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/weirhq/weir/runtime/engine"
)

// Owner blocks: `owner "NAME" { weight = 2, max_running = 100, ... }` gives
// one owner its share and quotas (engine.OwnerShare); `default_owner { ...
// }` gives them to every owner without a block of its own, each its own
// share. They are block-shaped settings, many per file and keyed by a
// label, so they are not knobs (a knob is one value with a flag and an
// environment variable): ownerAttrs is their one list instead, and the
// file's schema, the config view and the table of docs/operators.md are
// made from it. The default sits in a block of its own name rather than
// `owner "default"`, which would take a name an OS user or a token may
// really have.

// OwnerAttr is one attribute of an owner block.
type OwnerAttr struct {
	// HCL is the attribute's name in the block, and its key in the view.
	HCL string
	// Doc is the line an operator reads in the table.
	Doc string

	field func(*engine.OwnerShare) any
	kind  kind
	zero  string
}

// Unit is count or size.
func (a *OwnerAttr) Unit() string { return a.kind.unit }

// OwnerAttrs are the attributes of owner and default_owner blocks.
var OwnerAttrs = []*OwnerAttr{
	{HCL: "weight", zero: "`1`",
		Doc:   "the owner's share of the worker slots while owners contend for them: weights 2 and 1 get 2:1. At least 1",
		field: func(s *engine.OwnerShare) any { return &s.Weight }, kind: count(1)},
	{HCL: "max_running", zero: "none",
		Doc:   "the owner's runs started and not ended (waiting ones count); beyond it its starts are refused with E_OWNER_QUOTA (429)",
		field: func(s *engine.OwnerShare) any { return &s.MaxRunning }, kind: count(0)},
	{HCL: "max_queued", zero: "only `engine.max_queued`",
		Doc:   "the owner's runs accepted and not yet started; beyond it its starts are refused with E_OWNER_QUOTA (429). Above engine.max_queued it never binds (a warning)",
		field: func(s *engine.OwnerShare) any { return &s.MaxQueued }, kind: count(0)},
	{HCL: "budget_per_hour", zero: "none",
		Doc:   "cost units the owner's runs may settle in a sliding hour; once spent, its starts are refused with E_OWNER_BUDGET (429, Retry-After: when enough leaves the hour)",
		field: func(s *engine.OwnerShare) any { return &s.BudgetPerHour }, kind: count64(0)},
	{HCL: "storage", zero: "none",
		Doc:   "what the owner's runs (their records, with input, output and error) and kept events may take in the store, measured every minute; at it, its starts and events are refused with E_OWNER_QUOTA (429)",
		field: func(s *engine.OwnerShare) any { return &s.StorageBytes }, kind: size(0)},
}

// rawOwner is an owner block (Name "" for default_owner).
type rawOwner struct {
	Name     string    `hcl:"name,label"`
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawDefaultOwner struct {
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

func ownerSchema() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, a := range OwnerAttrs {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: a.HCL})
	}
	return s
}

// ownerShare reads one owner block's body into a share.
func (d *decoder) ownerShare(body hcl.Body, what string) (engine.OwnerShare, map[string]hcl.Expression) {
	var s engine.OwnerShare
	content, diags := body.Content(ownerSchema())
	d.problems = append(d.problems, diagError(diags).Problems...)
	exprs := map[string]hcl.Expression{}
	if content == nil {
		return s, exprs
	}
	for _, a := range OwnerAttrs {
		attr, ok := content.Attributes[a.HCL]
		if !ok || absent(attr.Expr) {
			continue
		}
		exprs[a.HCL] = attr.Expr
		a.kind.decode(d, what+" "+a.HCL, attr.Expr, nil, a.field(&s))
	}
	return s, exprs
}

// owners reads the owner blocks and the default_owner block into c, once
// the knobs are read (a quota is checked against the daemon's bounds).
func (d *decoder) owners(raw *rawFile, c *Config) {
	known := map[string]bool{}
	if c.TCP != nil {
		for _, t := range c.TCP.Tokens {
			known[t.Owner] = true
		}
	}
	if raw.DefaultOwner != nil {
		s, exprs := d.ownerShare(raw.DefaultOwner.Body, "default_owner")
		d.ownerSense("default_owner", s, exprs, c)
		c.DefaultOwner = s
	}
	seen := map[string]string{}
	for _, o := range raw.Owners {
		if !ownerName.MatchString(o.Name) {
			d.fail(o.DefRange, "owner %q: an owner is 1-128 letters, digits and _ . @ -, starting with a letter, digit or _", o.Name)
			continue
		}
		if prev, dup := seen[o.Name]; dup {
			d.fail(o.DefRange, "owner %q has two blocks (the other at %s)", o.Name, prev)
			continue
		}
		seen[o.Name] = strings.TrimSuffix(at(&o.DefRange), ": ")
		what := fmt.Sprintf("owner %q:", o.Name)
		s, exprs := d.ownerShare(o.Body, what)
		d.ownerSense(what, s, exprs, c)
		if !known[o.Name] && !osOwner(o.Name) {
			d.warnings = append(d.warnings, fmt.Sprintf("%sowner %q is no token's owner and no user of this system: the block applies to nobody until one is", at(&o.DefRange), o.Name))
		}
		if c.Owners == nil {
			c.Owners = map[string]engine.OwnerShare{}
		}
		c.Owners[o.Name] = s
	}
}

// ownerSense warns of a quota that cannot bind against the daemon's own
// bounds. A warning rather than a refusal: lowering engine.max_queued
// later must not make a file of owner blocks invalid, and the daemon's
// bound applies first either way.
func (d *decoder) ownerSense(what string, s engine.OwnerShare, exprs map[string]hcl.Expression, c *Config) {
	if s.MaxQueued > c.Engine.MaxQueued {
		r := exprs["max_queued"].Range()
		d.warnings = append(d.warnings, fmt.Sprintf("%s%s max_queued %d is above engine.max_queued %d: the daemon's bound refuses first (E_QUEUE_FULL)",
			at(&r), what, s.MaxQueued, c.Engine.MaxQueued))
	}
}

// osOwner reports whether name is an owner a uid on the socket can be: a
// user of this system, or a uid without one.
func osOwner(name string) bool {
	if _, err := strconv.Atoi(name); err == nil {
		return true
	}
	_, err := user.Lookup(name)
	return err == nil
}

// ownerView is a share as the config view shows it: each attribute set
// by its name, the storage as a size.
func ownerView(s engine.OwnerShare) *object {
	v := &object{}
	for _, a := range OwnerAttrs {
		val := reflect.ValueOf(a.field(&s)).Elem()
		if val.IsZero() {
			continue
		}
		if a.Unit() == "size" {
			n := val.Int()
			s, _ := strconv.Unquote(sizeText(n))
			v.set([]string{a.HCL}, s)
			continue
		}
		v.set([]string{a.HCL}, val.Interface())
	}
	return v
}

// ownerTable is the table of owner block attributes in docs/operators.md
// (TestDocOwnerAttrs keeps the doc current).
func ownerTable() string {
	var b strings.Builder
	b.WriteString("| attribute | unit | absent | |\n|---|---|---|---|\n")
	for _, a := range OwnerAttrs {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", a.HCL, a.Unit(), a.zero, strings.ReplaceAll(a.Doc, "|", `\|`))
	}
	return b.String()
}
