package api

import (
	"encoding/json"
	"net/http"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// journal is GET /v1/runs/{id}/journal: the run's model turns and the
// declarations of the tools its version calls, for a recording.
func (s *Server) journal(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	j, err := s.eng.Ops().Journal(r.Context(), ownerFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out, err := JournalOf(j)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// JournalOf is an engine's journal as the API spells it.
func JournalOf(j *engine.Journal) (*apitypes.RunJournal, error) {
	out := &apitypes.RunJournal{Turns: []json.RawMessage{}, Tools: convertAllEmpty(j.Tools, ToolDeclOf)}
	for _, t := range j.Turns {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		out.Turns = append(out.Turns, b)
	}
	return out, nil
}

// ToolDeclOf is a tool's declaration as the API spells it.
func ToolDeclOf(t flows.ToolInfo) apitypes.ToolDecl {
	d := apitypes.ToolDecl{Name: t.Name, Effect: string(t.Effect), Idempotent: t.Idempotent, Cost: t.Cost,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Description: t.Description, Chat: t.Chat,
		TimeoutMS: t.Timeout.Milliseconds(), Reconcile: t.Reconcile}
	for _, m := range t.Models {
		d.Models = append(d.Models, apitypes.ModelDecl{Alias: m.Alias, MaxTokens: m.MaxTokens, InputCost: m.InputCost, OutputCost: m.OutputCost})
	}
	return d
}
