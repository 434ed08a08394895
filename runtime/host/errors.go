package host

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/sdk/wire"
)

// Kind is the stable name of a tool call failure. Kinds cross into run
// events and the CLI, so they never change meaning.
type Kind string

// The kinds of tool call failure: sdk/wire defines their names once, for
// the plugin protocol, the SDK and the host.
const (
	// KindRetryable: the tool reported a failure that may go away; an
	// idempotent tool may be retried.
	KindRetryable Kind = wire.KindRetryable
	// KindPermanent: the tool reported a failure that retrying won't fix.
	KindPermanent Kind = wire.KindPermanent
	// KindSchema: the input does not match the tool's input schema (or is
	// not JSON); the plugin never saw the call.
	KindSchema Kind = wire.KindSchema
	// KindUnknownTool: no installed plugin provides the tool.
	KindUnknownTool Kind = wire.KindUnknownTool
	// KindCrashed: the plugin process died or could not be started; the
	// outcome of the call is unknown. Retryable for an idempotent tool.
	KindCrashed Kind = wire.KindCrashed
	// KindDeadline: the call's deadline passed before it finished.
	KindDeadline Kind = wire.KindDeadline
	// KindTooLarge: the input or the answer exceeds MaxMessageBytes.
	KindTooLarge Kind = wire.KindTooLarge
	// KindCancelled: the caller cancelled the call, or the host closed.
	KindCancelled Kind = wire.KindCancelled
	// KindProtocol: the plugin speaks another protocol version or broke
	// the protocol (bad manifest, output that is not JSON, ...).
	KindProtocol Kind = wire.KindProtocol
	// KindChecksum: the plugin binary is missing, not pinned, or no longer
	// matches its pinned SHA-256; it is not launched.
	KindChecksum Kind = wire.KindChecksum
)

// ToolError is a failed tool call.
type ToolError struct {
	Kind Kind
	// Tool is the tool called, or the plugin for failures before a tool
	// is known.
	Tool    string
	Message string
	// Code is the stable code the tool gave the failure (E_MODEL_RATE,
	// say; checked with wire.CheckErrorCode), "" if none.
	Code string
	// RetryAfter is, for KindRetryable, the earliest the tool says a retry
	// is worth it (at most wire.MaxRetryAfter); 0: no hint.
	RetryAfter time.Duration
}

func (e *ToolError) Error() string {
	var b strings.Builder
	if e.Tool != "" {
		b.WriteString(e.Tool + ": ")
	}
	b.WriteString(string(e.Kind))
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	b.WriteString(": " + e.Message)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	return b.String()
}

// Retryable reports whether the same call may succeed if made again.
func (e *ToolError) Retryable() bool { return e.Kind == KindRetryable || e.Kind == KindCrashed }

// KindOf returns the kind of a *ToolError in err's chain, or "".
func KindOf(err error) Kind {
	var te *ToolError
	if errors.As(err, &te) {
		return te.Kind
	}
	return ""
}

// IsRetryable reports whether err is a *ToolError that may go away on a
// retry (KindRetryable or KindCrashed). Whether to retry is the caller's
// decision: only idempotent tools are retried automatically.
func IsRetryable(err error) bool {
	var te *ToolError
	return errors.As(err, &te) && te.Retryable()
}

func toolErrorf(kind Kind, tool, format string, args ...any) *ToolError {
	return &ToolError{Kind: kind, Tool: tool, Message: fmt.Sprintf(format, args...)}
}
