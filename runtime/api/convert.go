package api

import (
	"fmt"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// The API answers in apitypes, never with a store record or an engine type
// marshalled as it is: the conversions below are the one place where the
// two meet, so a field added to a record reaches the wire only when it is
// added here. TestWireUnchanged holds the JSON of each conversion to the
// JSON of its source.

// timeFormat is how a run's times are shown: UTC, milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// ViewOf shows a run (and its progress, if known) as the API does.
func ViewOf(run *store.Run, p *engine.Progress) *apitypes.Run {
	return &apitypes.Run{ID: run.ID, Flow: run.Flow, Version: run.Version, Owner: run.Owner, RequestID: run.RequestID,
		Phase: apitypes.Phase(run.Phase), Attempt: run.Attempt, Input: run.Input, Output: run.Output,
		Error: runErrorOf(run.Error), Progress: progressOf(p), Budget: run.Budget, Spent: run.Spent, Overspent: run.Overspent, Escrow: run.Escrow, Parent: run.ParentRunID, ParentNode: run.ParentNode,
		ForkedFrom: forkRefOf(run.ForkedFrom), StartedBy: run.StartedBy,
		CreatedAt: run.CreatedAt.UTC().Format(timeFormat), UpdatedAt: run.UpdatedAt.UTC().Format(timeFormat)}
}

func runErrorOf(e *store.RunError) *apitypes.RunError {
	if e == nil {
		return nil
	}
	return &apitypes.RunError{Code: e.Code, Message: e.Message}
}

func progressOf(p *engine.Progress) *apitypes.Progress {
	if p == nil {
		return nil
	}
	out := &apitypes.Progress{Attempt: p.Attempt, Phase: apitypes.Phase(p.Phase), Node: p.Node, Done: p.Done, Visits: p.Visits,
		Cohorts: convertAll(p.Cohorts, cohortOf)}
	out.Agents = convertAll(p.Agents, func(a engine.AgentView) apitypes.Agent { return apitypes.Agent(a) })
	if t := p.Tool; t != nil {
		tp := toolProgressOf(*t)
		out.Tool = &tp
	}
	out.Items = convertAll(p.Items, toolProgressOf)
	return out
}

func toolProgressOf(t engine.ToolProgress) apitypes.ToolProgress {
	return apitypes.ToolProgress{Node: t.Node, Item: t.Item, Tool: t.Tool, Done: t.Done, Total: t.Total}
}

func cohortOf(c engine.CohortView) apitypes.Cohort {
	return apitypes.Cohort{Node: c.Node, Visit: c.Visit, State: c.State, Items: c.Items, Need: c.Need, Admitted: c.Admitted,
		InFlight: c.InFlight, Published: c.Published, Mature: c.Mature, Failed: c.Failed, Stopped: c.Stopped, Late: c.Late,
		Cutoff: c.Cutoff, Sufficient: c.Sufficient, Marker: c.Marker, Unknown: c.Unknown, ChildBudget: c.ChildBudget}
}

func eventOf(e *store.Event) *apitypes.Event {
	return &apitypes.Event{Seq: e.Seq, RunID: e.RunID, At: e.At, Type: e.Type, Attempt: e.Attempt, Node: e.Node, Detail: e.Detail}
}

func deadLetterOf(d *store.DeadLetter) *apitypes.DeadLetter {
	return &apitypes.DeadLetter{TaskID: d.TaskID, RunID: d.RunID, Owner: d.Owner, Flow: d.Flow, Node: d.Node, Tool: d.Tool,
		Errors: convertAll(d.Errors, attemptErrorOf), At: d.At}
}

func attemptErrorOf(e store.AttemptError) apitypes.AttemptError {
	return apitypes.AttemptError{Attempt: e.Attempt, Code: e.Code, Message: e.Message, At: e.At}
}

func waitOf(w engine.HumanWait) apitypes.HumanWait {
	return apitypes.HumanWait{ID: w.ID, Kind: w.Kind, RunID: w.RunID, Flow: w.Flow, Node: w.Node, Since: w.Since, Until: w.Until, Shown: w.Shown, Digest: w.Digest()}
}

func startResultOf(r *engine.StartResult) *apitypes.StartResult {
	return &apitypes.StartResult{RunID: r.RunID, Existing: r.Existing}
}

func sourceFileOf(f apitypes.SourceFile) engine.SourceFile {
	return engine.SourceFile{Path: f.Path, Src: f.Src}
}

func registerResultOf(r *engine.RegisterResult) *apitypes.RegisterResult {
	return &apitypes.RegisterResult{Flows: convertAll(r.Flows, flowOf), Schedules: convertAll(r.Schedules, registeredScheduleOf),
		Triggers: convertAll(r.Triggers, registeredTriggerOf), Diagnostics: convertAll(r.Diagnostics, diagnosticOf)}
}

func registeredTriggerOf(t engine.RegisteredTrigger) apitypes.RegisteredTrigger {
	return apitypes.RegisteredTrigger{Name: t.Name, Event: t.Event, Flow: t.Flow}
}

func registeredScheduleOf(s engine.RegisteredSchedule) apitypes.RegisteredSchedule {
	return apitypes.RegisteredSchedule{Name: s.Name, Flow: s.Flow, Next: s.Next, Paused: s.Paused}
}

// registerRefusalOf answers files that do not pass the checks (errs, the
// errors among r's diagnostics): the error shape every refusal has, with
// every diagnostic (warnings included). The message names the first
// error, cut: its file and text come from the caller.
func registerRefusalOf(r *engine.RegisterResult, errs flows.Diagnostics) *apitypes.RegisterRefusal {
	first := errs[0]
	pos := first.File
	if first.Line != 0 {
		pos = fmt.Sprintf("%s:%d:%d", first.File, first.Line, first.Col)
	}
	return &apitypes.RegisterRefusal{Code: apitypes.CodeFlowInvalid, Class: apitypes.ClassProtocol,
		Message: fmt.Sprintf("the files do not pass registration's checks: %d error(s), the first %s: %s: %s; nothing was registered",
			len(errs), textbound.Quote(pos), first.Code, textbound.Quote(first.Message)),
		Diagnostics: convertAll(r.Diagnostics, diagnosticOf)}
}

func flowOf(f engine.RegisteredFlow) apitypes.Flow {
	return apitypes.Flow{Name: f.Name, Hash: f.Hash, Doc: f.Doc, Nodes: f.Nodes, Input: f.Input, InputOmitted: f.InputOmitted, Owner: f.Owner}
}

func diagnosticOf(d flows.Diagnostic) apitypes.Diagnostic {
	return apitypes.Diagnostic{File: d.File, Line: d.Line, Col: d.Col, Code: string(d.Code), Message: d.Message, Chain: d.Chain, Severity: string(d.Severity)}
}

func statsOf(s engine.Stats) *apitypes.Stats {
	return &apitypes.Stats{Types: convertAll(s.Types, typeStatsOf), Refusals: s.Refusals, Counts: s.Counts,
		Models: convertAll(s.Models, func(m engine.ModelStats) apitypes.ModelStats { return apitypes.ModelStats(m) })}
}

func typeStatsOf(t engine.TypeStats) apitypes.TypeStats {
	return apitypes.TypeStats(t)
}

func statusOf(h engine.Health, cfg *apitypes.ConfigInfo, id *Identity) *apitypes.Status {
	st := &apitypes.Status{Admission: h.Admission, Reason: h.Reason, Queued: h.Queued, Parked: h.Parked, Held: h.Held, Slots: h.Slots, Config: cfg}
	if id != nil {
		st.Caller = &apitypes.Caller{Owner: id.Owner, Local: id.Local}
	}
	return st
}

// convertAll converts every element, keeping nil as nil (the wire tells
// null from []).
func convertAll[S, T any](in []S, f func(S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
