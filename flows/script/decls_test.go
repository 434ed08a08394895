package script_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/internal/flowtest"
	"github.com/weirhq/weir/flows/script"
)

// The same declarations in both languages: a flow with an event wait, a
// schedule with an input lambda, one with a constant input and the
// defaults, and a trigger with input and filter.
const declsStar = `
flow(name = "digest", nodes = [
    wait("updated", event = "ticket.updated", match = lambda ctx: ctx.input["ticket"], timeout = "7d"),
])
schedule("daily", flow = "digest", cron = "0 9 * * MON-FRI", timezone = "Europe/Paris",
    input = lambda tick: {"ticket": tick["schedule"] + "@" + tick["time"]},
    overlap = "queue", catch_up = "all", max_catch_up = 3)
schedule("often", flow = "digest", every = "30s", input = {"ticket": "T-1"})
on_event("ticket.created", flow = "digest",
    input = lambda ev: {"ticket": ev["key"]},
    filter = lambda ev: ev["payload"]["priority"] == "high")
`

const declsLua = `
flow{"digest", nodes = {
  wait{"updated", event = "ticket.updated", match = function(ctx) return ctx.input.ticket end, timeout = "7d"},
}}
schedule{"daily", flow = "digest", cron = "0 9 * * MON-FRI", timezone = "Europe/Paris",
  input = function(tick) return {ticket = tick.schedule .. "@" .. tick.time} end,
  overlap = "queue", catch_up = "all", max_catch_up = 3}
schedule{"often", flow = "digest", every = "30s", input = {ticket = "T-1"}}
on_event{"ticket.created", flow = "digest",
  input = function(ev) return {ticket = ev.key} end,
  filter = function(ev) return ev.payload.priority == "high" end}
`

func declFiles(lang string) []flows.File {
	if lang == "lua" {
		return []flows.File{{Path: "d.lua", Src: []byte(declsLua)}}
	}
	return []flows.File{{Path: "d.star", Src: []byte(declsStar)}}
}

// Both languages declare the same schedules, triggers and event wait,
// with the defaults filled in.
func TestDeclsIR(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"star", "lua"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			m, ds := script.Check(declFiles(lang), nil)
			if len(ds) > 0 {
				t.Fatal(ds)
			}
			if len(m.Schedules) != 2 || len(m.Triggers) != 1 {
				t.Fatalf("%d schedules, %d triggers", len(m.Schedules), len(m.Triggers))
			}
			daily, often := m.Schedule("daily"), m.Schedule("often")
			if daily.Flow != "digest" || daily.Cron != "0 9 * * MON-FRI" || daily.Zone != "Europe/Paris" || daily.Every != 0 ||
				daily.Overlap != "queue" || daily.CatchUp != "all" || daily.MaxCatchUp != 3 || daily.Input != nil ||
				*daily.InputFn != (flows.CallableRef{Decl: "schedule:daily", Param: "input"}) {
				t.Errorf("daily = %+v", daily)
			}
			if often.Every != 30*time.Second || often.Cron != "" || string(often.Input) != `{"ticket":"T-1"}` || often.InputFn != nil ||
				often.Overlap != flows.DefaultOverlap || often.CatchUp != flows.DefaultCatchUp || often.MaxCatchUp != flows.DefaultMaxCatchUp {
				t.Errorf("often = %+v (input %s)", often, often.Input)
			}
			if _, err := daily.Spec(); err != nil {
				t.Errorf("daily's spec: %v", err)
			}
			tr := m.Trigger("digest_on_ticket_created")
			if tr == nil || tr.Event != "ticket.created" || tr.Flow != "digest" || tr.Input.String() != "trigger:digest_on_ticket_created.input" ||
				tr.Filter.Param != "filter" {
				t.Errorf("trigger = %+v", tr)
			}
			w := m.Flow("digest").Node("updated")
			if w.Event != "ticket.updated" || *w.Match != (flows.CallableRef{Flow: "digest", Node: "updated", Param: "match"}) || w.Timeout != 7*24*time.Hour {
				t.Errorf("wait = %+v", w)
			}
			src := m.DeclSources(daily.Decl())
			if len(src) != 1 || flows.HashSources(src) != daily.SourceHash || tr.SourceHash != daily.SourceHash {
				t.Errorf("sources %v, hash %s", src, daily.SourceHash)
			}
		})
	}
}

// An evaluator built from a declaration's stored sources evaluates its
// callables with the tick or the event alone; through Scripts too.
func TestDeclCallablesEvaluate(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{"star", "lua"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			m, ds := script.Load(declFiles(lang))
			if len(ds) > 0 {
				t.Fatal(ds)
			}
			daily, tr := m.Schedule("daily"), m.Triggers[0]
			ev, err := script.NewEvaluator(m.DeclSources(daily.Decl()))
			if err != nil {
				t.Fatal(err)
			}
			tickV := map[string]any{"time": "2026-12-01T09:00:00+01:00", "schedule": "daily"}
			got, err := ev.Call(*daily.InputFn, flows.Context{}, tickV)
			if want := map[string]any{"ticket": "daily@2026-12-01T09:00:00+01:00"}; err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("input(tick) = %#v, %v; want %#v", got, err, want)
			}
			event := func(priority string) map[string]any {
				return map[string]any{"name": "ticket.created", "id": "e-1", "key": "T-42", "payload": map[string]any{"priority": priority}}
			}
			got, err = ev.Call(*tr.Input, flows.Context{}, event("high"))
			if err != nil || !reflect.DeepEqual(got, map[string]any{"ticket": "T-42"}) {
				t.Errorf("input(ev) = %#v, %v", got, err)
			}
			for _, c := range []struct {
				priority string
				want     bool
			}{{"high", true}, {"low", false}} {
				if got, err := ev.Call(*tr.Filter, flows.Context{}, event(c.priority)); err != nil || got != c.want {
					t.Errorf("filter(%s) = %v, %v; want %v", c.priority, got, err, c.want)
				}
			}
			w := m.Flow("digest").Node("updated")
			if got, err := ev.Call(*w.Match, flows.Context{Input: map[string]any{"ticket": "T-7"}}); err != nil || got != "T-7" {
				t.Errorf("match(ctx) = %#v, %v", got, err)
			}
			if _, err := ev.Call(*w.Match, flows.Context{Input: map[string]any{"ticket": 7}}); err == nil || !strings.Contains(err.Error(), "match must return the key") {
				t.Errorf("match returning a number: %v", err)
			}

			// The Scripts boundary: refs cross as JSON, the tick as an argument.
			ref, _ := json.Marshal(daily.InputFn)
			var back flows.CallableRef
			if err := json.Unmarshal(ref, &back); err != nil || back != *daily.InputFn {
				t.Fatalf("ref %s decoded as %+v, %v", ref, back, err)
			}
			src := flows.Sources{Hash: daily.SourceHash, Load: func(context.Context) ([]flows.File, error) { return m.DeclSources(daily.Decl()), nil }}
			res, err := script.Local{}.Call(t.Context(), src, flows.Context{}, []flows.Call{{Ref: back, Args: []any{tickV}}})
			if err != nil || len(res) != 1 || res[0].Err != nil || !reflect.DeepEqual(res[0].Value, map[string]any{"ticket": "daily@2026-12-01T09:00:00+01:00"}) {
				t.Errorf("Local.Call = %+v, %v", res, err)
			}
		})
	}
}

// A module with schedules and triggers crosses a process boundary as
// JSON whole: the sandbox sends Analyze's module that way.
func TestModuleWithDeclsRoundTripsJSON(t *testing.T) {
	t.Parallel()
	m, ds := script.Load(declFiles("star"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	back, _ := flowtest.JSONRoundTrip[flows.Module](t, m)
	strip := func(s flows.Schedule) flows.Schedule { s.Site = nil; return s }
	for i, s := range m.Schedules {
		if !reflect.DeepEqual(strip(*s), *back.Schedules[i]) {
			t.Errorf("schedule %d: %+v, decoded %+v", i, *s, *back.Schedules[i])
		}
	}
	tr, tb := *m.Triggers[0], *back.Triggers[0]
	tr.Site = nil
	if !reflect.DeepEqual(tr, tb) {
		t.Errorf("trigger %+v, decoded %+v", tr, tb)
	}
	if w := back.Flow("digest").Node("updated"); w.Event != "ticket.updated" || w.Match == nil {
		t.Errorf("wait decoded as %+v", w)
	}
	d := m.Schedules[0].Decl()
	if !reflect.DeepEqual(back.DeclSources(d), m.DeclSources(d)) || len(back.DeclSources(d)) == 0 {
		t.Errorf("decl sources %v, decoded %v", m.DeclSources(d), back.DeclSources(d))
	}
	if err := json.Unmarshal([]byte(`{"files": [], "flows": [], "schedules": [null]}`), &back); err == nil {
		t.Error("a null schedule decoded")
	}
	if err := json.Unmarshal([]byte(`{"files": [], "flows": [], "decl_sources": {"schedule:x": ["gone.star"]}}`), &back); err == nil {
		t.Error("decl sources naming a missing file decoded")
	}
}

// Lua reports what Starlark reports, at the line, with the same
// did-you-mean; a misspelt keyword names the parameter it meant.
func TestDeclDiagnosticsInLua(t *testing.T) {
	t.Parallel()
	src := `flow{"digest", nodes = {task{"a", tool = "t"}}}
schedule{"s", flow = "digets",
  cron = "0 9 * * *", overlap = "skp"}
on_event{"Ticket", flow = "digest", name = "t"}
schedule{"s", flow = "digest", every = "1h"}
`
	_, ds := script.Check([]flows.File{{Path: "x.lua", Src: []byte(src)}}, flows.MapCatalog{"t": {Name: "t", Idempotent: true}})
	var got []string
	for _, d := range ds {
		got = append(got, d.String())
	}
	want := []string{
		`x.lua:2: E_UNKNOWN_FLOW: schedule "s": no flow named "digets" is among the files checked together (did you mean "digest"?)`,
		`x.lua:3: E_INVALID: schedule "s": overlap = "skp", want "skip", "queue" or "allow" (did you mean "skip"?)`,
		`x.lua:4: E_INVALID: on_event "t": event "Ticket": event names are dot-separated lower-case identifiers such as "ticket.created" (letters, digits and '_', at most 128 bytes)`,
		`x.lua:5: E_DUPLICATE: schedule "s" is already declared at x.lua:2`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range []struct{ file, src, want string }{
		{"k.star", `schedule("s", flow = "f", crn = "0 9 * * *")`, `(did you mean cron?)`},
		{"k.lua", `schedule{"s", flow = "f", evrey = "1h"}`, `(did you mean every?)`},
		{"k.star", `on_event("a.b", flow = "f", filtr = lambda ev: True)`, `(did you mean filter?)`},
		{"k.lua", `wait{"w", event = "a.b", mach = "k"}`, `(did you mean match?)`},
	} {
		_, ds := script.Load([]flows.File{{Path: c.file, Src: []byte(c.src + "\n")}})
		if len(ds) != 1 || ds[0].Code != flows.CodeScript || !strings.Contains(ds[0].Message, c.want) {
			t.Errorf("%s: %s, want E_SCRIPT with %s", c.src, ds, c.want)
		}
	}
}

// A declaration is not a node, and it is made while the file loads.
func TestDeclsAreNotNodes(t *testing.T) {
	t.Parallel()
	_, ds := script.Load([]flows.File{{Path: "n.star", Src: []byte(`flow(name = "f", nodes = [schedule("s", flow = "f", every = "1m")])` + "\n")}})
	if len(ds) != 1 || ds[0].Code != flows.CodeScript || !strings.Contains(ds[0].Message, "nodes[0] is a NoneType") {
		t.Errorf("schedule as a node: %s", ds)
	}
}
