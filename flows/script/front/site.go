package front

import "github.com/weirhq/weir/flows"

// LineCol is a position within a file.
type LineCol struct{ Line, Col int32 }

// Site is what the syntax tree says about one call expression: where the
// call starts and where each keyword argument is written. The interpreter
// only knows the position of the call's parenthesis (Starlark) or its line
// (Lua).
type Site struct {
	Start flows.Pos
	KW    []KwArg
	Elems *[]LineCol // the file's list elements, which KwArg.Lo:Hi index
}

// KwArg is where one keyword argument is written. When its value is a
// list literal, Lo:Hi index where each element starts in the file's list
// elements, so that a diagnostic about one entry of tools = [...] points
// at that entry. (Indexes rather than a slice keep a 10,000-node flow's
// sites small.)
type KwArg struct {
	Name      string
	Line, Col int32
	Lo, Hi    int32
}

// ArgPos implements flows.CallSite.
func (s *Site) ArgPos(param string) flows.Pos {
	for _, k := range s.KW {
		if k.Name == param {
			return flows.Pos{File: s.Start.File, Line: int(k.Line), Col: int(k.Col)}
		}
	}
	return s.Start
}

// ElemPos is the position of element i of the list literal written for
// param, or of the argument itself when it is not a list literal (a list
// built by the script has no element positions). It implements
// flows.CallSite.
func (s *Site) ElemPos(param string, i int) flows.Pos {
	for _, k := range s.KW {
		if k.Name == param {
			if i >= 0 && i < int(k.Hi-k.Lo) && s.Elems != nil {
				e := (*s.Elems)[int(k.Lo)+i]
				return flows.Pos{File: s.Start.File, Line: int(e.Line), Col: int(e.Col)}
			}
			return flows.Pos{File: s.Start.File, Line: int(k.Line), Col: int(k.Col)}
		}
	}
	return s.Start
}
