package host

import (
	"fmt"

	"github.com/weirhq/weir/runtime/tool"
)

// Kind is the stable name of a tool call failure (see package tool, where
// the kinds are defined for the engine and the host alike).
type Kind = tool.Kind

// The kinds of tool call failure. The engine's package tool and the plugin
// protocol (sdk/wire) spell them alike; TestKindsMatchTheProtocol holds
// them equal.
const (
	KindRetryable   = tool.KindRetryable
	KindPermanent   = tool.KindPermanent
	KindSchema      = tool.KindSchema
	KindUnknownTool = tool.KindUnknownTool
	KindCrashed     = tool.KindCrashed
	KindDeadline    = tool.KindDeadline
	KindTooLarge    = tool.KindTooLarge
	KindCancelled   = tool.KindCancelled
	KindProtocol    = tool.KindProtocol
	KindChecksum    = tool.KindChecksum
	KindUnknown     = tool.KindUnknown
	KindNotSent     = tool.KindNotSent
)

// ToolError is a failed tool call.
type ToolError = tool.Error

// KindOf returns the kind of a *ToolError in err's chain, or "".
func KindOf(err error) Kind { return tool.KindOf(err) }

// IsRetryable reports whether err is a *ToolError that may go away on a
// retry (KindRetryable, KindCrashed, KindUnknown or KindNotSent). Whether
// to retry is the caller's decision: only idempotent tools are retried
// automatically, and any tool after KindNotSent.
func IsRetryable(err error) bool { return tool.IsRetryable(err) }

func toolErrorf(kind Kind, toolName, format string, args ...any) *ToolError {
	return &ToolError{Kind: kind, Tool: toolName, Message: fmt.Sprintf(format, args...)}
}
