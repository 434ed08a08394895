package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// fill sets every field reachable from v to a value that is not its zero
// value, so a field a conversion forgets shows in the JSON.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"k":[1,"two"]}`)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k)
		fill(t, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("any"))
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v.SetUint(9)
	case reflect.Float64:
		v.SetFloat(1.5)
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}

func filled[T any](t *testing.T) T {
	var v T
	fill(t, reflect.ValueOf(&v).Elem())
	return v
}

func sameWire(t *testing.T, name string, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(w) != string(g) {
		t.Errorf("%s changes the wire:\n was %s\n now %s", name, w, g)
	}
}

// TestWireUnchanged: each conversion answers exactly the JSON its source
// marshalled to when the server wrote records as they are, with every
// field set (so a field added to a record and not to its API type fails
// here), and with the empty lists that tell null from [].
func TestWireUnchanged(t *testing.T) {
	t.Parallel()
	progress := filled[engine.Progress](t)
	sameWire(t, "progressOf", progress, progressOf(&progress))
	closing := engine.CohortView{Node: "f", State: "closing"} // unset cutoff and sufficiency stay out
	sameWire(t, "cohortOf (open)", closing, cohortOf(closing))
	ev := filled[store.Event](t)
	sameWire(t, "eventOf", ev, eventOf(&ev))
	dl := filled[store.DeadLetter](t)
	sameWire(t, "deadLetterOf", dl, deadLetterOf(&dl))
	sameWire(t, "deadLetterOf (no errors)", store.DeadLetter{}, deadLetterOf(&store.DeadLetter{}))
	hw := filled[engine.HumanWait](t)
	sameWire(t, "waitOf", hw, waitOf(hw))
	sr := filled[engine.StartResult](t)
	sameWire(t, "startResultOf", sr, startResultOf(&sr))
	rr := filled[engine.RegisterResult](t)
	sameWire(t, "registerResultOf", rr, registerResultOf(&rr))
	sameWire(t, "registerResultOf (none)", engine.RegisterResult{}, registerResultOf(&engine.RegisterResult{}))
	rf := filled[engine.RegisteredFlow](t)
	sameWire(t, "flowOf", rf, flowOf(rf))
	sameWire(t, "flows (none)", []engine.RegisteredFlow(nil), convertAll([]engine.RegisteredFlow(nil), flowOf))
	st := filled[engine.Stats](t)
	sameWire(t, "statsOf", st, statsOf(st))
	sf := filled[apitypes.SourceFile](t)
	sameWire(t, "sourceFileOf", sf, sourceFileOf(sf))
	d := filled[flows.Diagnostic](t)
	sameWire(t, "diagnosticOf", d, diagnosticOf(d))

	// The status embedded the engine's health beside the config and the
	// caller's identity.
	h, ci, id := filled[engine.Health](t), filled[apitypes.ConfigInfo](t), filled[Identity](t)
	was := struct {
		engine.Health
		Config *apitypes.ConfigInfo `json:"config,omitempty"`
		Caller *Identity            `json:"caller"`
	}{h, &ci, &id}
	sameWire(t, "statusOf", was, statusOf(h, &ci, &id))

	// The run view was its own struct over the store's and the engine's
	// types.
	run := filled[store.Run](t)
	type runView struct {
		ID        string           `json:"id"`
		Flow      string           `json:"flow"`
		Version   string           `json:"version"`
		Owner     string           `json:"owner"`
		RequestID string           `json:"request_id,omitempty"`
		Phase     store.Phase      `json:"phase"`
		Attempt   int              `json:"attempt"`
		Input     json.RawMessage  `json:"input,omitempty"`
		Output    json.RawMessage  `json:"output,omitempty"`
		Error     *store.RunError  `json:"error,omitempty"`
		Progress  *engine.Progress `json:"progress,omitempty"`
		Budget    int64            `json:"budget"`
		Spent     int64            `json:"spent"`
		Overspent int64            `json:"overspent,omitempty"`
		Escrow    int64            `json:"escrow,omitempty"`
		Parent    string           `json:"parent_run_id,omitempty"`
		// ParentNode was added beside Parent, for the console's child runs.
		ParentNode string `json:"parent_node,omitempty"`
		// ForkedFrom and StartedBy were added for forks.
		ForkedFrom *store.ForkRef `json:"forked_from,omitempty"`
		StartedBy  string         `json:"started_by,omitempty"`
		// TraceID was added for traces.
		TraceID   string `json:"trace_id,omitempty"`
		CreatedAt string `json:"created_at"`
		UpdatedAt string `json:"updated_at"`
	}
	sameWire(t, "ViewOf", runView{ID: run.ID, Flow: run.Flow, Version: run.Version, Owner: run.Owner, RequestID: run.RequestID,
		Phase: run.Phase, Attempt: run.Attempt, Input: run.Input, Output: run.Output, Error: run.Error, Progress: &progress,
		Budget: run.Budget, Spent: run.Spent, Overspent: run.Overspent, Escrow: run.Escrow, Parent: run.ParentRunID, ParentNode: run.ParentNode,
		ForkedFrom: run.ForkedFrom, StartedBy: run.StartedBy, TraceID: run.TraceID,
		CreatedAt: "2026-03-04T05:06:07.891Z", UpdatedAt: "2026-03-04T05:06:07.891Z"}, ViewOf(&run, &progress))
	// Waits are set by the run's own route, beside the view: a run view
	// without them is the wire it was.
	withWaits := ViewOf(&run, &progress)
	withWaits.Waits = []apitypes.HumanWait{waitOf(hw)}
	if b, _ := json.Marshal(withWaits); !strings.Contains(string(b), `"waits":[{"id":"s-string","kind":"s-string"`) {
		t.Errorf("a run view with waits: %s", b)
	}
	sameWire(t, "ViewOf (no progress)", runView{CreatedAt: "0001-01-01T00:00:00.000Z", UpdatedAt: "0001-01-01T00:00:00.000Z"}, ViewOf(&store.Run{}, nil))
}

// The codes clients match are the codes the engine answers.
func TestCodesMatchTheEngine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ api, engine string }{
		{apitypes.CodeBadRequest, engine.CodeBadRequest},
		{apitypes.CodeBadRequestID, engine.CodeBadRequestID},
		{apitypes.CodeNotFound, engine.CodeNotFound},
		{apitypes.CodeUnknownFlow, engine.CodeUnknownFlow},
		{apitypes.CodeBadInput, engine.CodeBadInput},
		{apitypes.CodeDedupConflict, engine.CodeDedupConflict},
		{apitypes.CodeQueueFull, engine.CodeQueueFull},
		{apitypes.CodeOwnerQuota, engine.CodeOwnerQuota},
		{apitypes.CodeOwnerBudget, engine.CodeOwnerBudget},
		{apitypes.CodeDraining, engine.CodeDraining},
		{apitypes.CodeStorage, engine.CodeStorage},
		{apitypes.CodeNotWaiting, engine.CodeNotWaiting},
		{apitypes.CodeAlreadyDecided, engine.CodeAlreadyDecided},
		{apitypes.CodeStaleDecision, engine.CodeStaleDecision},
		{apitypes.CodeApprovalExpired, engine.CodeApprovalExpired},
		{apitypes.DecisionApproved, engine.DecisionApproved},
		{apitypes.DecisionRejected, engine.DecisionRejected},
		{apitypes.DecisionEdited, engine.DecisionEdited},
		{apitypes.DecisionResponded, engine.DecisionResponded},
		{apitypes.CodeAmbiguousWait, engine.CodeAmbiguousWait},
		{apitypes.CodeRunEnded, engine.CodeRunEnded},
		{apitypes.CodeNotDead, engine.CodeNotDead},
		{apitypes.WaitExhausted, engine.WaitExhausted},
		{apitypes.CodeForkPoint, engine.CodeForkPoint},
		{apitypes.CodeForkEffects, engine.CodeForkEffects},
		{apitypes.WaitUnknown, engine.WaitUnknown},
		{apitypes.CodeWaitExpired, engine.CodeWaitExpired},
		{apitypes.CodeBadResult, engine.CodeBadResult},
		{apitypes.CodeIncompatible, engine.CodeIncompatible},
		{apitypes.WaitHuman, engine.WaitHuman},
		{apitypes.WaitApproval, engine.WaitApproval},
		{apitypes.WaitChild, engine.WaitChild},
		{apitypes.WaitCohort, engine.WaitCohort},
		{apitypes.WaitTimer, engine.WaitTimer},
		{apitypes.CodeOutcomeUnknown, engine.CodeOutcomeUnknown},
		{apitypes.CodeQueueTimeout, engine.CodeQueueTimeout},
		{apitypes.CodeBudgetExhausted, engine.CodeBudgetExhausted},
		{apitypes.CodeAttemptsExceeded, engine.CodeAttemptsExceeded},
		{apitypes.CodeRetriesExhausted, engine.CodeRetriesExhausted},
		{apitypes.CodeToolFailed, engine.CodeToolFailed},
		{apitypes.CodeCancelled, engine.CodeCancelled},
		{apitypes.CodeWaitTimeout, engine.CodeWaitTimeout},
		{apitypes.CodeRejected, engine.CodeRejected},
		{apitypes.ClassProtocol, string(engine.ClassProtocol)},
		{apitypes.ClassRun, string(engine.ClassRun)},
		{apitypes.ClassStorage, string(engine.ClassStorage)},
		{string(apitypes.CancelRequested), string(engine.CancelRequested)},
		{string(apitypes.CancelTooLate), string(engine.CancelTooLate)},
		{string(apitypes.CancelAlreadyTerminal), string(engine.CancelAlreadyTerminal)},
		{string(apitypes.PhaseQueued), string(store.PhaseQueued)},
		{string(apitypes.PhaseRunning), string(store.PhaseRunning)},
		{string(apitypes.PhaseWaiting), string(store.PhaseWaiting)},
		{string(apitypes.PhaseCompleting), string(store.PhaseCompleting)},
		{string(apitypes.PhaseCompleted), string(store.PhaseCompleted)},
		{string(apitypes.PhaseCancelled), string(store.PhaseCancelled)},
		{string(apitypes.PhaseFailed), string(store.PhaseFailed)},
	} {
		if c.api != c.engine {
			t.Errorf("the API says %q where the engine says %q", c.api, c.engine)
		}
	}
	for p := range knownPhases {
		if apitypes.Phase(p).Terminal() != p.Terminal() {
			t.Errorf("phase %s: terminal %v in the API, %v in the store", p, apitypes.Phase(p).Terminal(), p.Terminal())
		}
	}
}
