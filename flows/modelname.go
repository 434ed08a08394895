package flows

import (
	"fmt"
	"strings"
)

// MaxModelToolName is the longest tool name model providers accept
// (OpenAI's limit, the strictest of them).
const MaxModelToolName = 64

// ModelToolName is the name a tool or flow is shown to a model under.
// Providers allow only [A-Za-z0-9_-]{1,64} in tool names, while weir's tool
// names hold a dot ("web.search") and flow names may: every '.' becomes
// "__" ("web__search"). So that the mapping can be reversed
// (ToolNameFromModel), a name that already holds "__" or has '_' next to
// a '.' has no model name, nor has one that would be longer than
// MaxModelToolName or hold another character.
func ModelToolName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("an empty name has no model tool name")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !modelNameChar(c) && c != '.' {
			return "", fmt.Errorf("%q holds %q; a model tool name holds only letters, digits, '_', '-' and (as \"__\") '.'", name, c)
		}
	}
	switch {
	case strings.Contains(name, "__"):
		return "", fmt.Errorf("%q holds \"__\", which stands for '.' in a model tool name, so it could not be told apart", name)
	case strings.Contains(name, "_."), strings.Contains(name, "._"):
		return "", fmt.Errorf("%q has '_' next to '.', so its model tool name could not be read back", name)
	}
	m := strings.ReplaceAll(name, ".", "__")
	if len(m) > MaxModelToolName {
		return "", fmt.Errorf("%q becomes the model tool name %q, %d characters, more than the %d providers accept", name, m, len(m), MaxModelToolName)
	}
	return m, nil
}

// ToolNameFromModel reverses ModelToolName: it returns the tool or flow
// name a model called by s, or an error when no name maps to s.
func ToolNameFromModel(s string) (string, error) {
	if s == "" || len(s) > MaxModelToolName {
		return "", fmt.Errorf("model tool name %q: want 1 to %d characters", s, MaxModelToolName)
	}
	for i := 0; i < len(s); i++ {
		if !modelNameChar(s[i]) {
			return "", fmt.Errorf("model tool name %q holds %q", s, s[i])
		}
	}
	name := strings.ReplaceAll(s, "__", ".")
	if back, err := ModelToolName(name); err != nil || back != s {
		return "", fmt.Errorf("model tool name %q is not the model name of any tool or flow", s)
	}
	return name, nil
}

func modelNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
