package script

import (
	"github.com/weirhq/weir/flows"
)

// unknownParams are a node's on_unknown and unknown_timeout, as written.
type unknownParams struct {
	onUnknown, timeout optString
}

// onUnknown checks a node's on_unknown ("fail" or "ask", suggesting the
// one a misspelling most likely meant) and unknown_timeout (a positive
// duration, meaningful only with on_unknown = "ask"), and sets them on
// the node.
func (nb *nodeBuilder) onUnknown(p unknownParams) {
	n := nb.n()
	if v := p.onUnknown; v.set {
		if !checkChoice("on_unknown", v, func(format string, args ...any) { nb.addf("on_unknown", flows.CodeInvalid, format, args...) },
			choice{flows.OnUnknownFail, "take the error wire with E_OUTCOME_UNKNOWN"},
			choice{flows.OnUnknownAsk, "park the run until a person resolves the call"}) {
			return
		}
		n.OnUnknown = v.s
	}
	if !p.timeout.set {
		return
	}
	if n.OnUnknown != flows.OnUnknownAsk {
		nb.addf("unknown_timeout", flows.CodeInvalid, "unknown_timeout = %q bounds an unknown wait, which only on_unknown = %q parks on", p.timeout.s, flows.OnUnknownAsk)
		return
	}
	nb.duration("unknown_timeout", p.timeout, &n.UnknownTimeout)
}
