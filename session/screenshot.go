package session

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Default screenshot size.
const (
	ScreenWidth  = 100
	ScreenHeight = 30
)

// Renderer is optionally implemented by custom widgets to draw themselves in
// a text screenshot: at most width runes per line.
type Renderer interface {
	Render(width int) []string
}

// Screenshot draws view on a width×height character grid (zero means the
// default 100×30): columns stack, rows share the width, boxes frame their
// content, masked inputs show their mask. It is pure.
func Screenshot(view Node, width, height int) string {
	if width <= 0 {
		width = ScreenWidth
	}
	if height <= 0 {
		height = ScreenHeight
	}
	width, height = min(width, 1000), min(height, 1000)
	lines := draw(view, width, 0)
	var b strings.Builder
	for i := range height {
		l := ""
		if i < len(lines) {
			l = lines[i]
		}
		b.WriteString(pad(l, width))
		if i < height-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func draw(n Node, w, depth int) []string {
	if n == nil || w <= 0 || depth >= MaxViewDepth {
		return nil
	}
	depth++
	switch x := n.(type) {
	case Renderer:
		return clip(x.Render(w), w)
	case Column:
		return drawStack(x.Items, w, depth)
	case Row:
		return drawRow(x.Items, w, depth)
	case Box:
		return drawBox(x.Title, drawStack(x.Items, w-2, depth), w)
	case Modal:
		body := append(clip(splitLines(x.Body), w-2), drawStack(x.Content, w-2, depth)...)
		body = append(body, "[ OK ] [ Cancel ]")
		return drawBox(x.Title, body, w)
	case Viewport:
		all := drawStack(x.Content, w, depth)
		start := min(max(x.Offset, 0), len(all))
		end := len(all)
		if x.Height > 0 {
			end = min(start+x.Height, len(all))
		}
		return all[start:end]
	}
	return clip(leaf(n, w), w)
}

func leaf(n Node, w int) []string {
	switch x := n.(type) {
	case Text:
		return splitLines(x.Text)
	case Button:
		return []string{"[ " + x.Label + " ]"}
	case TextInput:
		v := x.Value
		if x.Mask != 0 {
			v = strings.Repeat(string(x.Mask), utf8.RuneCountInString(v))
		} else if v == "" {
			v = x.Placeholder
		}
		return []string{labelled(x.Label, "["+v+"]")}
	case PasswordField:
		mask := x.Mask
		if mask == 0 {
			mask = '*'
		}
		return []string{labelled(x.Label, "["+strings.Repeat(string(mask), utf8.RuneCountInString(x.Value))+"]")}
	case TextArea:
		return append([]string{x.Label}, splitLines(x.Value)...)
	case Checkbox:
		mark := "[ ]"
		if x.Checked {
			mark = "[x]"
		}
		return []string{mark + " " + x.Label}
	case SelectList:
		out := []string{x.Label}
		for i, o := range x.Options {
			out = append(out, marker(i == x.Selected, "> ", "  ")+o)
		}
		return out
	case Menu:
		return []string{strings.Join(x.Items, " | ")}
	case Tabs:
		parts := make([]string, len(x.Tabs))
		for i, t := range x.Tabs {
			parts[i] = marker(i == x.Selected, "["+t+"]", " "+t+" ")
		}
		return []string{strings.Join(parts, " ")}
	case Table:
		return drawTable(x)
	case Tree:
		return drawTree(x.Items, x.Selected, 0)
	case Scrubber:
		return []string{drawScrubber(x, w)}
	case Chart:
		d := x.Describe()
		return []string{fmt.Sprintf("%s (%d points, min %v, max %v)", x.Title, d["count"], d["min"], d["max"])}
	case Progress:
		return []string{drawProgress(x, w)}
	case StatusBar:
		return []string{strings.Join(x.Items, " │ ")}
	}
	if id := n.WidgetID(); id != "" {
		return []string{"<" + n.Kind() + " " + id + ">"}
	}
	return []string{"<" + n.Kind() + ">"}
}

func drawStack(items []Node, w, depth int) []string {
	var out []string
	for _, it := range items {
		out = append(out, draw(it, w, depth)...)
	}
	return out
}

func drawRow(items []Node, w, depth int) []string {
	if len(items) == 0 {
		return nil
	}
	cw := max((w-(len(items)-1))/len(items), 1)
	cols := make([][]string, len(items))
	h := 0
	for i, it := range items {
		cols[i] = draw(it, cw, depth)
		h = max(h, len(cols[i]))
	}
	out := make([]string, h)
	for r := range h {
		var b strings.Builder
		for i, c := range cols {
			if i > 0 {
				b.WriteByte(' ')
			}
			l := ""
			if r < len(c) {
				l = c[r]
			}
			b.WriteString(pad(l, cw))
		}
		out[r] = strings.TrimRight(b.String(), " ")
	}
	return clip(out, w)
}

func drawBox(title string, body []string, w int) []string {
	if w < 2 {
		return clip(body, w)
	}
	inner := w - 2
	top := "┌" + strings.Repeat("─", inner) + "┐"
	if title != "" {
		t := truncate(" "+title+" ", inner)
		top = "┌" + t + strings.Repeat("─", inner-utf8.RuneCountInString(t)) + "┐"
	}
	out := []string{top}
	for _, l := range body {
		out = append(out, "│"+pad(l, inner)+"│")
	}
	return append(out, "└"+strings.Repeat("─", inner)+"┘")
}

func drawTable(t Table) []string {
	widths := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		widths[i] = utf8.RuneCountInString(c.Title)
		for _, r := range t.Rows {
			if i < len(r.Cells) {
				widths[i] = max(widths[i], utf8.RuneCountInString(r.Cells[i]))
			}
		}
	}
	line := func(prefix string, cells []string) string {
		var b strings.Builder
		b.WriteString(prefix)
		for i := range t.Columns {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(pad(c, widths[i]) + " ")
		}
		return strings.TrimRight(b.String(), " ")
	}
	head := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		head[i] = c.Title
		if c.Key == t.SortColumn {
			head[i] += marker(t.SortDirection == "desc", "↓", "↑")
			widths[i] = max(widths[i], utf8.RuneCountInString(head[i]))
		}
	}
	out := []string{line("  ", head)}
	for _, r := range t.Rows {
		out = append(out, line(marker(r.Key == t.Selected && r.Key != "", "> ", "  "), r.Cells))
	}
	return out
}

func drawTree(items []TreeItem, sel string, depth int) []string {
	var out []string
	for _, it := range items {
		icon := "  "
		if len(it.Children) > 0 {
			icon = marker(it.Expanded, "▾ ", "▸ ")
		}
		out = append(out, strings.Repeat("  ", depth)+marker(it.ID == sel, ">", " ")+icon+it.Label)
		if it.Expanded {
			out = append(out, drawTree(it.Children, sel, depth+1)...)
		}
	}
	return out
}

func drawScrubber(s Scrubber, w int) string {
	state := marker(s.Playing, "▶", "⏸")
	label := fmt.Sprintf(" %s %s/%s", state, clock(s.Position), clock(s.Duration))
	bar := max(w-utf8.RuneCountInString(label)-2, 1)
	pos := 0
	if s.Duration > 0 {
		pos = min(int(s.Position/s.Duration*float64(bar)), bar-1)
	}
	return "[" + strings.Repeat("─", pos) + "●" + strings.Repeat("─", bar-pos-1) + "]" + label
}

func drawProgress(p Progress, w int) string {
	frac := 0.0
	if p.Max > 0 {
		frac = min(max(p.Value/p.Max, 0), 1)
	}
	label := fmt.Sprintf(" %.0f%%", frac*100)
	if p.Label != "" {
		label = " " + p.Label + label
	}
	bar := max(w-utf8.RuneCountInString(label)-2, 1)
	fill := int(frac * float64(bar))
	return "[" + strings.Repeat("█", fill) + strings.Repeat("░", bar-fill) + "]" + label
}

func clock(sec float64) string {
	s := int(max(sec, 0))
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func labelled(label, v string) string {
	if label == "" {
		return v
	}
	return label + ": " + v
}

func marker(on bool, yes, no string) string {
	if on {
		return yes
	}
	return no
}

func splitLines(s string) []string { return strings.Split(s, "\n") }

// clip sanitises lines and cuts them to w runes.
func clip(lines []string, w int) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = truncate(Sanitize(l), w)
	}
	return out
}

func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= w {
		return s
	}
	r := []rune(s)
	return string(r[:w])
}

func pad(s string, w int) string {
	s = truncate(s, w)
	if n := utf8.RuneCountInString(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}
