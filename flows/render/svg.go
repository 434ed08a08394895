package render

import (
	"fmt"
	"html"
	"strings"
	"unicode/utf8"

	"github.com/weirhq/weir/flows"
)

// The SVG drawing's geometry, in pixels. Nodes sit in layers by their
// distance from the entry node; a wire to the same or an earlier layer (a
// loop) is drawn as a curve to the right of its nodes.
const (
	svgCharWidth  = 7
	svgLineHeight = 15
	svgPadX       = 10
	svgPadY       = 8
	svgGapX       = 30
	svgGapY       = 50
	svgMargin     = 20
)

type svgBox struct {
	n          *flows.Node
	lines      []string
	x, y, w, h int // x, y: top left
}

// layers ranks each node by its breadth-first distance from the entry:
// a wire from a node to a deeper layer points down. Nodes no wire reaches
// go in one layer after the others.
func layers(f *flows.Flow) [][]*flows.Node {
	rank := map[string]int{}
	if f.Entry != "" && f.Node(f.Entry) != nil {
		rank[f.Entry] = 0
		queue := []string{f.Entry}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			for _, w := range f.Node(id).Wires() {
				if _, seen := rank[w.To]; !seen && f.Node(w.To) != nil {
					rank[w.To] = rank[id] + 1
					queue = append(queue, w.To)
				}
			}
		}
	}
	deepest := -1
	for _, r := range rank {
		deepest = max(deepest, r)
	}
	out := make([][]*flows.Node, deepest+1)
	var loose []*flows.Node
	for _, n := range f.Nodes { // declaration order within a layer
		if r, ok := rank[n.ID]; ok {
			out[r] = append(out[r], n)
		} else {
			loose = append(loose, n)
		}
	}
	if len(loose) > 0 {
		out = append(out, loose)
	}
	return out
}

// renderSVG draws the graph as a standalone SVG document: the same nodes,
// labels, wires and mark colours as the Mermaid and dot texts. Each node
// is a <g class="node MARK" data-node="ID"> so a page can find it.
func renderSVG(f *flows.Flow, marks map[string]Mark) string {
	ls := layers(f)
	boxes := map[string]*svgBox{}
	rowW := make([]int, len(ls))
	rowH := make([]int, len(ls))
	for r, row := range ls {
		for _, n := range row {
			b := &svgBox{n: n, lines: label(n)}
			longest := 0
			for _, l := range b.lines {
				longest = max(longest, utf8.RuneCountInString(l))
			}
			b.w = longest*svgCharWidth + 2*svgPadX
			b.h = len(b.lines)*svgLineHeight + 2*svgPadY
			boxes[n.ID] = b
			rowW[r] += b.w
			rowH[r] = max(rowH[r], b.h)
		}
		rowW[r] += svgGapX * (len(row) - 1)
	}
	width := 0
	for _, w := range rowW {
		width = max(width, w)
	}
	width += 2*svgMargin + 80 // room on the right for loops
	y := svgMargin
	for r, row := range ls {
		x := svgMargin + (width-80-2*svgMargin-rowW[r])/2
		for _, n := range row {
			b := boxes[n.ID]
			b.x, b.y = x, y+(rowH[r]-b.h)/2
			x += b.w + svgGapX
		}
		y += rowH[r] + svgGapY
	}
	height := y - svgGapY + svgMargin

	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" class="flow-graph" data-flow="%s" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="12">`+"\n",
		html.EscapeString(f.Name), width, height, width, height)
	s.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>` + "\n")
	for _, n := range f.Nodes {
		from := boxes[n.ID]
		for _, w := range n.Wires() {
			to, ok := boxes[w.To]
			if !ok {
				continue
			}
			dash := ""
			if w.Label == "error" {
				dash = ` stroke-dasharray="5,4"`
			}
			var path string
			var lx, ly int
			if to.y > from.y {
				x1, y1 := from.x+from.w/2, from.y+from.h
				x2, y2 := to.x+to.w/2, to.y
				path = fmt.Sprintf("M%d,%d L%d,%d", x1, y1, x2, y2)
				lx, ly = (x1+x2)/2+4, (y1+y2)/2
			} else { // a loop, or a wire within a layer: around the right side
				x1, y1 := from.x+from.w, from.y+from.h/2
				x2, y2 := to.x+to.w, to.y+to.h/2
				cx := max(x1, x2) + 60
				path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, cx, y1, cx, y2, x2, y2)
				lx, ly = cx-10, (y1+y2)/2
			}
			fmt.Fprintf(&s, `<g class="wire" data-from="%s" data-to="%s" data-label="%s"><path d="%s" fill="none" stroke="#555"%s marker-end="url(#arrow)"/><text x="%d" y="%d" fill="#555" font-size="10">%s</text></g>`+"\n",
				html.EscapeString(n.ID), html.EscapeString(w.To), html.EscapeString(w.Label), path, dash, lx, ly, html.EscapeString(w.Label))
		}
	}
	for _, n := range f.Nodes {
		b := boxes[n.ID]
		fill, class := "#ffffff", "node"
		if m, ok := marks[n.ID]; ok {
			fill, class = markColours[m], "node "+string(m)
		}
		fmt.Fprintf(&s, `<g class="%s" data-node="%s" data-kind="%s">`, class, html.EscapeString(n.ID), html.EscapeString(string(n.Kind)))
		s.WriteString(svgShape(n.Kind, b, fill))
		for i, l := range b.lines {
			weight := ""
			if i == 0 {
				weight = ` font-weight="bold"`
			}
			fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="middle"%s>%s</text>`, b.x+b.w/2, b.y+svgPadY+(i+1)*svgLineHeight-3, weight, html.EscapeString(l))
		}
		s.WriteString("</g>\n")
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// svgShape outlines a node by its kind, as the other formats shape it:
// branches as diamonds, waits as pills, fan-outs slanted, agents as
// hexagons, subflows with a double edge, tasks as rounded boxes.
func svgShape(k flows.NodeKind, b *svgBox, fill string) string {
	const stroke = `stroke="#333" stroke-width="1.2"`
	x, y, w, h := b.x, b.y, b.w, b.h
	switch k {
	case flows.KindBranch:
		return fmt.Sprintf(`<polygon points="%d,%d %d,%d %d,%d %d,%d" fill="%s" %s/>`, x+w/2, y-6, x+w+8, y+h/2, x+w/2, y+h+6, x-8, y+h/2, fill, stroke)
	case flows.KindWait:
		return fmt.Sprintf(`<rect x="%d" y="%d" width="%d" height="%d" rx="%d" fill="%s" %s/>`, x, y, w, h, h/2, fill, stroke)
	case flows.KindFanout:
		return fmt.Sprintf(`<polygon points="%d,%d %d,%d %d,%d %d,%d" fill="%s" %s/>`, x+8, y, x+w+8, y, x+w-8, y+h, x-8, y+h, fill, stroke)
	case flows.KindAgent:
		return fmt.Sprintf(`<polygon points="%d,%d %d,%d %d,%d %d,%d %d,%d %d,%d" fill="%s" %s/>`, x, y, x+w, y, x+w+10, y+h/2, x+w, y+h, x, y+h, x-10, y+h/2, fill, stroke)
	case flows.KindSubflow:
		return fmt.Sprintf(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s" %s/><rect x="%d" y="%d" width="%d" height="%d" fill="none" %s/>`, x, y, w, h, fill, stroke, x+4, y, w-8, h, stroke)
	}
	return fmt.Sprintf(`<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" %s/>`, x, y, w, h, fill, stroke)
}
