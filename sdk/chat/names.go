package chat

import (
	"fmt"
	"sort"
	"strings"
)

// MaxProviderToolName is the longest tool name providers accept.
const MaxProviderToolName = 64

// ProviderToolName maps a weir tool name onto the alphabet providers
// accept for tool names, [A-Za-z0-9_-]{1,64}: each '.' becomes "__", so
// "notes.put" is shown to the model as "notes__put". The mapping is
// reversible (UnmapToolName undoes it) because it refuses the names for
// which it would not be: a name holding "__" already, or a '_' next to a
// '.', or any character outside [A-Za-z0-9_.-], or one whose mapped form
// is longer than 64.
func ProviderToolName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("tool name is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.':
		case c == '_':
			if i > 0 && (name[i-1] == '_' || name[i-1] == '.') || i+1 < len(name) && name[i+1] == '.' {
				return "", fmt.Errorf("tool name %q cannot be shown to a model: \"__\" or a '_' next to a '.' would not map back", name)
			}
		default:
			return "", fmt.Errorf("tool name %q cannot be shown to a model: %q is outside [A-Za-z0-9_.-]", name, c)
		}
	}
	mapped := strings.ReplaceAll(name, ".", "__")
	if len(mapped) > MaxProviderToolName {
		return "", fmt.Errorf("tool name %q cannot be shown to a model: %q is %d characters, more than %d", name, mapped, len(mapped), MaxProviderToolName)
	}
	return mapped, nil
}

// UnmapToolName is the inverse of ProviderToolName: each "__" becomes
// '.'. It is exact for every name ProviderToolName accepts; a name the
// model invented comes back as whatever it unmaps to, which the caller
// finds among the tools it offered or not.
func UnmapToolName(provider string) string {
	return strings.ReplaceAll(provider, "__", ".")
}

// CheckToolNames reports every name of a tool list that cannot be shown
// to a model: names ProviderToolName refuses, and names whose mapped
// forms collide (the same tool listed twice, or two names a provider
// would not tell apart). Registration runs it over an agent's tools.
func CheckToolNames(names []string) error {
	var problems []string
	seen := map[string]string{}
	for _, n := range names {
		m, err := ProviderToolName(n)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		// Compare case-folded: a provider that folds case would not tell
		// "A.b" from "a.b" apart.
		key := strings.ToLower(m)
		if prev, ok := seen[key]; ok {
			if prev == n {
				problems = append(problems, fmt.Sprintf("tool %q is listed twice", n))
			} else {
				problems = append(problems, fmt.Sprintf("tools %q and %q collide as %q", prev, n, m))
			}
			continue
		}
		seen[key] = n
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("tool names: %s", strings.Join(problems, "; "))
}
