package flows

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Code is the stable identifier of a kind of diagnostic. Codes cross process
// boundaries (CLI output, API answers) and are matched by scripts, so an
// existing code never changes its meaning.
type Code string

// Diagnostic codes. Load-time codes come from running the scripts; graph
// codes from checking one flow on its own; the rest need the tool catalog or
// the other flows (registered ones and the ones checked together).
const (
	// CodeSyntax: the file does not parse, or names something undefined.
	CodeSyntax Code = "E_SYNTAX"
	// CodeScript: the script failed while running at registration: a
	// Starlark error, fail(), or a wrong argument type.
	CodeScript Code = "E_SCRIPT"
	// CodeScriptLimit: the script exceeded one of its limits while
	// running at registration; the message names which (memory, time,
	// steps, depth, size).
	CodeScriptLimit Code = "E_SCRIPT_LIMIT"
	// CodeLoad: a load() names a file outside the flow set, or loads form a
	// cycle.
	CodeLoad Code = "E_LOAD"
	// CodeInvalid: an argument has a value no flow can use (a negative
	// count, an unparsable duration, a callable of the wrong arity, ...).
	CodeInvalid Code = "E_INVALID"
	// CodeDuplicate: a flow name, node id or file is declared twice.
	CodeDuplicate Code = "E_DUPLICATE"
	// CodeUnknownNode: a wire (next, error, then, otherwise) names no node
	// of the flow.
	CodeUnknownNode Code = "E_UNKNOWN_NODE"
	// CodeUnreachable: no wire leads from the entry node to this node.
	CodeUnreachable Code = "E_UNREACHABLE"
	// CodeUnboundedCycle: a cycle in one flow's graph has no node on it
	// that declares max_visits.
	CodeUnboundedCycle Code = "E_UNBOUNDED_CYCLE"
	// CodeUnknownFlow: a subflow, fanout or agent names a flow that is
	// neither registered nor among the files checked together.
	CodeUnknownFlow Code = "E_UNKNOWN_FLOW"
	// CodeCycle: subflow calls (fanout flow= and agent flows= included)
	// form a cycle.
	CodeCycle Code = "E_CYCLE"
	// CodeDepth: the longest subflow chain below a flow is deeper than
	// its max_depth.
	CodeDepth Code = "E_DEPTH"
	// CodeFanoutBounds: a fanout lacks a positive width, depth or
	// max_items, or its children delegate deeper than its depth.
	CodeFanoutBounds Code = "E_FANOUT_BOUNDS"
	// CodeUnknownTool: no installed plugin provides the tool.
	CodeUnknownTool Code = "E_UNKNOWN_TOOL"
	// CodeAtMostOnce: a non-idempotent tool is retried, or used without
	// at_most_once = True (an agent's tool may be in approve instead); or
	// a node both retries and asks for at-most-once.
	CodeAtMostOnce Code = "E_AT_MOST_ONCE"
	// CodeAgentBounds: an agent lacks max_turns, or max_turns is outside
	// 1..MaxAgentTurns, or max_tokens is not positive or exceeds what its
	// model allows.
	CodeAgentBounds Code = "E_AGENT_BOUNDS"
	// CodeNotChat: an agent's model tool does not speak the chat
	// contract.
	CodeNotChat Code = "E_NOT_CHAT"
	// CodeUnknownModel: an agent's model tool offers no model by that
	// alias.
	CodeUnknownModel Code = "E_UNKNOWN_MODEL"
	// CodeToolNameCollision: a tool or flow an agent offers its model has
	// no reversible name in the providers' alphabet (ModelToolName), or
	// two of them map to the same name.
	CodeToolNameCollision Code = "E_TOOL_NAME_COLLISION"
	// CodeIRTooLarge: the flow's compiled graph (its IR, what the runtime
	// stores and loads for every run) is larger than MaxIRBytes.
	CodeIRTooLarge Code = "E_IR_TOO_LARGE"
	// CodeDocTooLarge: a flow's or a node's doc is longer than
	// MaxDocBytes.
	CodeDocTooLarge Code = "E_DOC_TOO_LARGE"
	// CodeToolInput: a node's constant args do not match its tool's
	// declared input schema, so every call would be refused.
	CodeToolInput Code = "E_TOOL_INPUT"
	// CodeFlowInput: a schedule's constant input does not match its
	// flow's input schema, so every firing would be refused.
	CodeFlowInput Code = "E_FLOW_INPUT"
	// CodeSchemaLimit: a flow's input or an agent's output schema is past
	// a bound of schemabound.go (its size, a pattern's size, or what
	// validating one value against it may cost).
	CodeSchemaLimit Code = "E_SCHEMA_LIMIT"

	// CodeFanoutResult (a warning): a callable uses a fanout's whole
	// result, the dict {results, late, sufficient, cutoff}, where the list
	// of its items' results (["results"]) is the likely intent.
	CodeFanoutResult Code = "W_FANOUT_RESULT"
)

// AllCodes lists every diagnostic code, in documentation order.
var AllCodes = []Code{
	CodeSyntax, CodeScript, CodeScriptLimit, CodeLoad, CodeInvalid, CodeDuplicate,
	CodeUnknownNode, CodeUnreachable, CodeUnboundedCycle,
	CodeUnknownFlow, CodeCycle, CodeDepth, CodeFanoutBounds,
	CodeUnknownTool, CodeAtMostOnce,
	CodeAgentBounds, CodeNotChat, CodeUnknownModel, CodeToolNameCollision,
	CodeIRTooLarge, CodeDocTooLarge, CodeToolInput, CodeFlowInput, CodeSchemaLimit,
	CodeFanoutResult,
}

// Severity says whether a diagnostic refuses the flow.
type Severity string

// The severities. Codes of warnings start with W_, of errors with E_.
const (
	// SeverityError refuses the flow: it is not registered.
	SeverityError Severity = ""
	// SeverityWarning reports a likely mistake the checker cannot prove:
	// the flow registers, and the warning comes back with the answer.
	SeverityWarning Severity = "warning"
)

// Pos is a position in a flow source file. Line and column are 1-based; a
// zero Line means the position is unknown or covers the whole file.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// String formats p as file:line:col, the form editors jump to.
func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// IsValid reports whether p names a file.
func (p Pos) IsValid() bool { return p.File != "" }

func comparePos(a, b Pos) int {
	return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
}

// Diagnostic is one problem found while loading or checking flows. Its JSON
// form is flat: {"file", "line", "col", "code", "message", "chain"}.
type Diagnostic struct {
	Pos
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Chain names the flows (or nodes, or files) that form the problem,
	// in order, for cycles and depth: ["a", "b", "a"].
	Chain []string `json:"chain,omitempty"`
	// Severity is "warning" for a warning; absent for an error.
	Severity Severity `json:"severity,omitempty"`
}

// String formats d as one line: `file:line:col: CODE: message`, with
// "warning: " before the code of a warning.
func (d Diagnostic) String() string {
	if d.Severity == SeverityWarning {
		return fmt.Sprintf("%s: warning: %s: %s", d.Pos, d.Code, d.Message)
	}
	return fmt.Sprintf("%s: %s: %s", d.Pos, d.Code, d.Message)
}

// FormatChain writes a chain the way diagnostics print it: a -> b -> a.
func FormatChain(chain []string) string { return strings.Join(chain, " -> ") }

// Diagnostics is every problem found in one load or check, sorted by
// position once the check is complete.
type Diagnostics []Diagnostic

// Err returns nil when there are no diagnostics, and otherwise an error
// whose message lists them one per line.
func (ds Diagnostics) Err() error {
	if len(ds) == 0 {
		return nil
	}
	return &DiagnosticsError{Diagnostics: ds}
}

// Errors returns the diagnostics that are errors (nil when there are
// none): what refuses a flow. Warnings alone refuse nothing.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// Has reports whether any diagnostic has the code c.
func (ds Diagnostics) Has(c Code) bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Code == c })
}

// String prints the diagnostics one per line.
func (ds Diagnostics) String() string {
	var b strings.Builder
	_ = ds.WriteText(&b)
	return b.String()
}

// WriteText prints the diagnostics one per line in their printed form.
func (ds Diagnostics) WriteText(w io.Writer) error {
	for _, d := range ds {
		if _, err := fmt.Fprintln(w, d); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON prints the diagnostics as one indented JSON array ([] when
// there are none).
func (ds Diagnostics) WriteJSON(w io.Writer) error {
	if ds == nil {
		ds = Diagnostics{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // chains read a -> b, not a -\u003e b
	enc.SetIndent("", "  ")
	return enc.Encode(ds)
}

// Sorted orders diagnostics by position, then code, then message, and
// drops exact duplicates (the same problem reached by two paths). It
// reorders ds in place; a front end calls it on what it collected.
func (ds Diagnostics) Sorted() Diagnostics {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(comparePos(a.Pos, b.Pos), cmp.Compare(a.Code, b.Code), cmp.Compare(a.Message, b.Message))
	})
	return slices.CompactFunc(ds, func(a, b Diagnostic) bool {
		return a.Pos == b.Pos && a.Code == b.Code && a.Message == b.Message && slices.Equal(a.Chain, b.Chain)
	})
}

// DiagnosticsError is the error form of a non-empty Diagnostics, for
// callers that treat a refused registration as an error.
type DiagnosticsError struct {
	Diagnostics Diagnostics
}

// Error lists the diagnostics, one per line.
func (e *DiagnosticsError) Error() string {
	return strings.TrimSuffix(e.Diagnostics.String(), "\n")
}
