package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weirhq/weir/internal/escape"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// liveLine shows a run's progress while a command follows it: on a
// terminal one line rewritten in place, elsewhere a plain line each time it
// changes (logs and pipes stay readable).
type liveLine struct {
	w    io.Writer
	tty  bool
	last string
}

func newLiveLine(w io.Writer) *liveLine {
	// The line's own cursor controls go to the terminal as they are; what
	// it shows is escaped (see escape.String in show).
	raw := w
	if ew, ok := w.(*escape.Writer); ok {
		raw = ew.Unwrap()
	}
	if f, ok := raw.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return &liveLine{w: raw, tty: true}
		}
	}
	return &liveLine{w: w}
}

// show displays line if it changed.
func (l *liveLine) show(line string) {
	if line == l.last {
		return
	}
	l.last = line
	if l.tty {
		fmt.Fprintf(l.w, "\r\033[K  %s", escape.String(line))
		return
	}
	fmt.Fprintf(l.w, "  %s\n", line)
}

// done ends the line on a terminal.
func (l *liveLine) done() {
	if l.tty && l.last != "" {
		fmt.Fprintln(l.w)
	}
}

// progressLine says where a run is: phase, node, attempt, the agent at
// the node's turns and spend, open fan-outs' counts and the running tool's
// own progress.
func progressLine(v *apitypes.Run) string {
	parts := []string{string(v.Phase)}
	if p := v.Progress; p != nil {
		if p.Node != "" {
			parts = append(parts, "at "+p.Node)
		}
		for _, a := range p.Agents {
			if a.Node == p.Node {
				parts = append(parts, fmt.Sprintf("[agent %s: %s, %d tokens, cost %d]", a.Node, count(a.Turns, "turn"), a.InputTokens+a.OutputTokens, a.Cost))
			}
		}
		for _, c := range p.Cohorts {
			if c.State == "closed" {
				continue
			}
			// Published is what ended and was handed on; mature is the
			// judgement the close counts: separate figures, said apart.
			parts = append(parts, fmt.Sprintf("[%s %s: %d of %d items ended, %d in flight; %d of %d needed judged mature]",
				c.Node, c.State, c.Published, c.Items, c.InFlight, c.Mature, c.Need))
		}
		if t := p.Tool; t != nil && t.Total > 0 {
			parts = append(parts, fmt.Sprintf("(%s %d/%d)", t.Tool, t.Done, t.Total))
		}
	}
	parts = append(parts, fmt.Sprintf("attempt %d", v.Attempt))
	return strings.Join(parts, " ")
}
