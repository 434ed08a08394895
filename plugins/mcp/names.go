package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// toolSep separates the server's name from the tool's in a weir tool
// part: mcp.files-read_file. Server names hold no '-', so the first one
// splits the part. It is not "__": an agent shows "mcp.x" to a model as
// "mcp__x", and a name holding "__" could not be read back (sdk/chat).
const toolSep = "-"

// Limits of names.
const (
	// maxToolPart is the longest part after "mcp.": weir allows 64, but
	// an agent shows the tool to a model as "mcp__PART", and models
	// accept 64 characters (chat.MaxProviderToolName).
	maxToolPart = 64 - len("mcp__")
	// maxMCPName is the MCP specification's limit on a tool's name.
	maxMCPName = 128
	// hashLen is the hex digits of the SHA-256 of the MCP name that end a
	// part too long for maxToolPart.
	hashLen = 8
)

// toolPart maps an MCP tool name to the weir tool part SERVER-NAME.
// weir's alphabet is lower-case [a-z0-9_-]; MCP names are case-sensitive
// and may hold dots. Upper-case letters become lower-case, '.' and any
// other byte outside the alphabet become '-', and a run of '_' becomes
// one (a model could not be shown "__"). A part longer than
// maxToolPart keeps its first bytes and ends with '-' and the first
// hashLen hex digits of the MCP name's SHA-256, so that two long names
// differing only at their end stay apart.
//
// The mapping loses case and punctuation, so it is made reversible by the
// table the bridge builds at launch (weir part → MCP name); two MCP names
// of one server that map to the same part are refused there (a
// collision), never resolved by guessing.
func toolPart(server, name string) (string, error) {
	if name == "" || len(name) > maxMCPName {
		return "", fmt.Errorf("server %s offers a tool named %q: MCP tool names are 1 to %d bytes", server, name, maxMCPName)
	}
	var b strings.Builder
	b.WriteString(server)
	b.WriteString(toolSep)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			if i == 0 || name[i-1] != '_' {
				b.WriteByte(c)
			}
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte('-')
		}
	}
	part := b.String()
	if len(part) > maxToolPart {
		sum := sha256.Sum256([]byte(name))
		part = part[:maxToolPart-hashLen-1] + "-" + hex.EncodeToString(sum[:])[:hashLen]
	}
	return part, nil
}

// nameTable maps weir tool parts back to MCP names, per server.
type nameTable map[string]string

// add maps name of server; it refuses a part another name already took.
func (t nameTable) add(server, name string) (string, error) {
	part, err := toolPart(server, name)
	if err != nil {
		return "", err
	}
	if other, ok := t[part]; ok {
		return "", fmt.Errorf("server %s offers tools %q and %q, which both map to weir's mcp.%s (weir tool names are lower-case [a-z0-9_-]): rename one on the server, or serve it from another server entry", server, other, name, part)
	}
	t[part] = name
	return part, nil
}
