package script

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
	"go.starlark.net/starlark"
)

// schedule() and on_event() declare beside the flows: what starts a flow
// by itself. They return None, so they cannot be a flow's node; their
// callables are called with one argument and no ctx (CallableRef.Decl).

var (
	specTickInput  = valueSpec{-1, "input(tick)", 1, "dict", 0}
	specEventInput = valueSpec{-1, "input(ev)", 1, "", 0}
	specFilter     = valueSpec{-1, "filter(ev)", 1, "", 0}
)

// declBuilder collects one declaration's diagnostics, each prefixed with
// what it declares (`schedule "daily": `).
type declBuilder struct {
	ls   *loadState
	site *front.Site
	what string
	decl string // "schedule:NAME", the key of its refs and its sources
}

func (db *declBuilder) addf(param string, code flows.Code, format string, args ...any) {
	db.ls.addf(db.site.ArgPos(param), code, nil, db.what+": "+format, args...)
}

// callable records a callable parameter: its arity is checked against
// spec, and the ref returned keys it for the evaluator. A constant of
// the shape spec allows is left to the caller: nil ref, ok.
func (db *declBuilder) callable(param string, v starlark.Value, spec valueSpec) (ref *flows.CallableRef, ok bool) {
	if v == nil || v == starlark.None {
		return nil, false
	}
	if msg := checkValue(v, spec); msg != "" {
		db.addf(param, flows.CodeInvalid, "%s %s", param, msg)
		return nil, false
	}
	if _, isFn := v.(starlark.Callable); !isFn {
		return nil, true
	}
	ref = &flows.CallableRef{Decl: db.decl, Param: param}
	if db.ls.callables != nil {
		db.ls.callables[*ref] = callable{value: v, pos: db.site.ArgPos(param)}
	}
	return ref, true
}

// enum checks that a policy parameter is one of its values, with a
// did-you-mean; the value is def when the parameter is not given.
func (db *declBuilder) enum(param string, v optString, values []string, def string) string {
	if !v.set {
		return def
	}
	for _, x := range values {
		if v.s == x {
			return x
		}
	}
	hint := ""
	if s := flows.Suggest(v.s, values); s != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	quoted := make([]string, len(values))
	for i, x := range values {
		quoted[i] = fmt.Sprintf("%q", x)
	}
	list := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	db.addf(param, flows.CodeInvalid, "%s = %q, want %s%s", param, v.s, list, hint)
	return def
}

// flowName checks the flow a declaration starts (whether it exists is
// the full check's).
func (db *declBuilder) flowName(flow string) {
	if !validName(flow) {
		db.addf("flow", flows.CodeInvalid, "flow = %q names no flow: flow names start with a letter or '_' and hold letters, digits, '_', '-' or '.'", flow)
	}
}

// declare registers the declaration's name, refusing one declared
// already, and says whether it is new.
func (db *declBuilder) declare(thread *starlark.Thread, pos flows.Pos) bool {
	ls := db.ls
	if prev, dup := ls.declPos[db.decl]; dup {
		ls.addf(pos, flows.CodeDuplicate, nil, "%s is already declared at %s", db.what, prev)
		return false
	}
	ls.declPos[db.decl] = pos
	if fs, _ := thread.Local(localFile).(*fileState); fs != nil {
		ls.declFile[db.decl] = fs.file.Path
	}
	return true
}

func badEventName(name string) string {
	return fmt.Sprintf("event %q: event names are dot-separated lower-case identifiers such as \"ticket.created\" (letters, digits and '_', at most %d bytes)", name, flows.MaxEventNameBytes)
}

// schedule(name, flow, cron, every, timezone, input, overlap, catch_up,
// max_catch_up, doc)
func builtinSchedule(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		name, flow, doc                     string
		cron, every, zone, overlap, catchUp optString
		maxCatchUp                          optInt
		input                               starlark.Value
	)
	ls, err := unpackBuiltin(thread, b, args, kwargs, "schedule name",
		"name", &name, "flow", &flow, "cron?", &cron, "every?", &every, "timezone?", &zone,
		"input?", &input, "overlap?", &overlap, "catch_up?", &catchUp, "max_catch_up?", &maxCatchUp, "doc?", &doc,
	)
	if err != nil {
		return nil, err
	}
	site := ls.callerSite(thread)
	s := &flows.Schedule{Name: name, Flow: flow, Cron: cron.s, Zone: zone.s, Doc: doc, Pos: site.Start, Site: site}
	db := &declBuilder{ls: ls, site: site, what: fmt.Sprintf("schedule %q", name), decl: s.Decl()}
	if !validName(name) {
		db.addf("name", flows.CodeInvalid, "schedule names start with a letter or '_' and hold letters, digits, '_', '-' or '.' (at most %d)", maxNameLen)
	}
	db.flowName(flow)
	db.spec(s, cron, every, zone)
	s.Overlap = db.enum("overlap", overlap, flows.Overlaps, flows.DefaultOverlap)
	s.CatchUp = db.enum("catch_up", catchUp, flows.CatchUps, flows.DefaultCatchUp)
	s.MaxCatchUp = flows.DefaultMaxCatchUp
	if maxCatchUp.set {
		if maxCatchUp.n < 1 || maxCatchUp.n > flows.MaxMaxCatchUp {
			db.addf("max_catch_up", flows.CodeInvalid, "max_catch_up = %d, want 1 to %d: the most missed ticks catch_up = \"all\" fires at once", maxCatchUp.n, flows.MaxMaxCatchUp)
		} else {
			s.MaxCatchUp = maxCatchUp.n
		}
	}
	var ok bool
	if s.InputFn, ok = db.callable("input", input, specTickInput); ok && s.InputFn == nil {
		if g, err := front.FromStarlark(input); err == nil {
			s.Input, _ = json.Marshal(g) // checkValue found its JSON form
		}
	}
	ls.checkDoc(site.ArgPos("doc"), db.what, doc)
	if db.declare(thread, site.Start) {
		ls.mod.Schedules = append(ls.mod.Schedules, s)
	}
	return starlark.None, nil
}

// spec checks the schedule's cron or period and its zone as the engine
// will read them (tick.Parse, whose errors are written for users).
func (db *declBuilder) spec(s *flows.Schedule, cron, every, zone optString) {
	if every.set {
		d, err := flows.ParseDuration(every.s)
		if err != nil {
			db.addf("every", flows.CodeInvalid, "every: %v", err)
			return
		}
		s.Every = d
	}
	if _, err := s.Spec(); err != nil {
		param := ""
		switch {
		case zone.set && strings.Contains(err.Error(), "timezone"):
			param = "timezone"
		case cron.set && !every.set:
			param = "cron"
		case every.set:
			param = "every"
		}
		db.addf(param, flows.CodeInvalid, "%v", err)
	}
}

// on_event(event, flow, input, filter, name, doc)
func builtinOnEvent(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var (
		event, flow, doc string
		name             optString
		input, filter    starlark.Value
	)
	ls, err := unpackBuiltin(thread, b, args, kwargs, "event name",
		"event", &event, "flow", &flow, "input?", &input, "filter?", &filter, "name?", &name, "doc?", &doc,
	)
	if err != nil {
		return nil, err
	}
	site := ls.callerSite(thread)
	t := &flows.Trigger{Name: cmp.Or(name.s, flows.DefaultTriggerName(event, flow)), Event: event, Flow: flow, Doc: doc, Pos: site.Start, Site: site}
	db := &declBuilder{ls: ls, site: site, what: fmt.Sprintf("on_event %q", t.Name), decl: t.Decl()}
	if !flows.ValidEventName(event) {
		db.addf("event", flows.CodeInvalid, "%s", badEventName(event))
	}
	db.flowName(flow)
	if !validName(t.Name) {
		db.addf("name", flows.CodeInvalid, "trigger names start with a letter or '_' and hold letters, digits, '_', '-' or '.' (at most %d); give name = \"...\"", maxNameLen)
	}
	t.Input, _ = db.callable("input", input, specEventInput)
	t.Filter, _ = db.callable("filter", filter, specFilter)
	ls.checkDoc(site.ArgPos("doc"), db.what, doc)
	if db.declare(thread, site.Start) {
		ls.mod.Triggers = append(ls.mod.Triggers, t)
	}
	return starlark.None, nil
}

// checkDecls is the full check of schedules and triggers: the flow each
// starts exists (among the files or registered), and a schedule's
// constant input matches that flow's input schema.
func (ls *loadState) checkDecls(lookup lookupFunc) error {
	for _, s := range ls.mod.Schedules {
		what := fmt.Sprintf("schedule %q", s.Name)
		f, err := ls.declFlow(what, s.Flow, s.ArgPos("flow"), lookup)
		if err != nil || f == nil || len(s.Input) == 0 {
			if err != nil {
				return err
			}
			continue
		}
		var ie *flows.InputError
		if err := f.ValidateInput(s.Input); errors.As(err, &ie) {
			ls.addf(s.ArgPos("input"), flows.CodeFlowInput, nil, "%s: input does not match the input schema of flow %q, so every firing would be refused: %s", what, f.Name, ie.Msg)
		}
	}
	for _, t := range ls.mod.Triggers {
		if _, err := ls.declFlow(fmt.Sprintf("on_event %q", t.Name), t.Flow, t.ArgPos("flow"), lookup); err != nil {
			return err
		}
	}
	return nil
}

// declFlow resolves the flow a declaration starts: the files' own first,
// then the registered ones. nil (reported) when neither has it.
func (ls *loadState) declFlow(what, name string, pos flows.Pos, lookup lookupFunc) (*flows.Flow, error) {
	if f := ls.mod.Flow(name); f != nil {
		return f, nil
	}
	if lookup != nil {
		f, err := lookup(name)
		if err != nil {
			return nil, fmt.Errorf("resolving flow %q: %w", name, err)
		}
		if f != nil {
			return f, nil
		}
	}
	if ls.incomplete || !validName(name) {
		return nil, nil // a file that did not run, or a name reported at load
	}
	names := make([]string, len(ls.mod.Flows))
	for i, f := range ls.mod.Flows {
		names[i] = f.Name
	}
	hint := ""
	if s := flows.Suggest(name, names); s != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	where := "is among the files checked together"
	if lookup != nil {
		where = "is registered or among the files checked with it"
	}
	ls.addf(pos, flows.CodeUnknownFlow, nil, "%s: no flow named %q %s%s", what, name, where, hint)
	return nil, nil
}

// computeDeclSources fills each schedule's and trigger's source closure
// and hash, as computeSources does for flows.
func (ls *loadState) computeDeclSources() {
	set := func(decl string, hash *string) {
		src := ls.closure(ls.declFile[decl])
		ls.mod.SetDeclSources(decl, src)
		*hash = flows.HashSources(src)
	}
	for _, s := range ls.mod.Schedules {
		set(s.Decl(), &s.SourceHash)
	}
	for _, t := range ls.mod.Triggers {
		set(t.Decl(), &t.SourceHash)
	}
}
