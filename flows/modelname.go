package flows

import (
	"fmt"

	"github.com/weirhq/weir/sdk/chat"
)

// MaxModelToolName is the longest tool name model providers accept
// (OpenAI's limit, the strictest of them).
const MaxModelToolName = chat.MaxProviderToolName

// ModelToolName is the name a tool or flow is shown to a model under: the
// chat contract's mapping (chat.ProviderToolName), every '.' becomes "__"
// ("web.search" -> "web__search"), and a name it could not read back has
// none. Registration checks an agent's tools with it, so the names a model
// sees are the ones the llm plugin sends.
func ModelToolName(name string) (string, error) {
	return chat.ProviderToolName(name)
}

// ToolNameFromModel reverses ModelToolName: it returns the tool or flow
// name a model called by s, or an error when no name maps to s.
func ToolNameFromModel(s string) (string, error) {
	name := chat.UnmapToolName(s)
	if back, err := chat.ProviderToolName(name); err != nil || back != s {
		return "", fmt.Errorf("model tool name %q is not the model name of any tool or flow", s)
	}
	return name, nil
}
