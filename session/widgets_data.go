package session

import (
	"fmt"
	"math"
)

// TableColumn is a table column; Key names it in sort and get_rows.
type TableColumn struct {
	Key, Title string
	Sortable   bool
}

// TableRow is a table row in displayed order; Key identifies it across sorts.
type TableRow struct {
	Key   string
	Cells []string
}

// Table shows rows in columns. Selected is the key of the selected row ("" for
// none); SortColumn and SortDirection describe the current order.
type Table struct {
	ID            string
	Columns       []TableColumn
	Rows          []TableRow
	Selected      string
	SortColumn    string
	SortDirection string
	Disabled      bool
	Exclude       bool
}

// Kind implements Node.
func (t Table) Kind() string { return "table" }

// WidgetID implements Node.
func (t Table) WidgetID() string { return t.ID }

// Excluded implements Excluder.
func (t Table) Excluded() bool { return t.Exclude }

// Actions implements ToolProvider.
func (t Table) Actions() []Action {
	if t.Disabled {
		return nil
	}
	return []Action{
		{Name: "select_row", Description: "Select a table row, by its 0-based position in the displayed order or its key.",
			Schema: objectSchema(nil, map[string]any{
				"row": map[string]any{"type": "integer", "minimum": 0, "description": "The row's position."},
				"key": prop("string", "The row's key."),
			}), Write: true},
		{Name: "sort", Description: "Sort a table by a sortable column.",
			Schema: objectSchema([]string{"column"}, map[string]any{
				"column":    prop("string", "The column key."),
				"direction": map[string]any{"type": "string", "enum": []any{"asc", "desc"}, "description": "Sort direction (default asc)."},
			}), Write: true},
		{Name: "get_rows", Description: "Read table rows in displayed order, with paging.",
			Schema: objectSchema(nil, map[string]any{
				"offset": map[string]any{"type": "integer", "minimum": 0, "description": "First row to return (default 0)."},
				"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": 500, "description": "Rows to return (default 50)."},
			})},
	}
}

// Perform implements ToolProvider.
func (t Table) Perform(action string, args map[string]any) (Outcome, error) {
	switch action {
	case "select_row":
		return t.selectRow(args)
	case "sort":
		col, err := requireString(args, "column")
		if err != nil {
			return Outcome{}, err
		}
		dir, ok, err := argString(args, "direction")
		if err != nil {
			return Outcome{}, err
		}
		if !ok {
			dir = "asc"
		}
		if dir != "asc" && dir != "desc" {
			return Outcome{}, fmt.Errorf("direction must be asc or desc: %w", ErrInvalidArgs)
		}
		for _, c := range t.Columns {
			if c.Key == col {
				if !c.Sortable {
					return Outcome{}, fmt.Errorf("column %q is not sortable: %w", col, ErrInvalidArgs)
				}
				return Outcome{Msg: Sort{Widget: t.ID, Column: col, Direction: dir}}, nil
			}
		}
		return Outcome{}, fmt.Errorf("no column %q: %w", col, ErrInvalidArgs)
	case "get_rows":
		return t.getRows(args)
	}
	return Outcome{}, unknownAction(t.Kind(), action)
}

func (t Table) selectRow(args map[string]any) (Outcome, error) {
	i, hasI, err := argInt(args, "row")
	if err != nil {
		return Outcome{}, err
	}
	k, hasK, err := argString(args, "key")
	if err != nil {
		return Outcome{}, err
	}
	switch {
	case hasK:
		for j, r := range t.Rows {
			if r.Key == k && (!hasI || i == j) {
				return Outcome{Msg: SelectRow{Widget: t.ID, Key: k, Row: j}}, nil
			}
		}
		return Outcome{}, fmt.Errorf("no row with key %q: %w", k, ErrInvalidArgs)
	case hasI:
		if i < 0 || i >= len(t.Rows) {
			return Outcome{}, fmt.Errorf("row %d out of range [0,%d): %w", i, len(t.Rows), ErrInvalidArgs)
		}
		return Outcome{Msg: SelectRow{Widget: t.ID, Key: t.Rows[i].Key, Row: i}}, nil
	}
	return Outcome{}, fmt.Errorf("argument \"row\" or \"key\" is required: %w", ErrInvalidArgs)
}

func (t Table) getRows(args map[string]any) (Outcome, error) {
	off, _, err := argInt(args, "offset")
	if err != nil {
		return Outcome{}, err
	}
	lim, ok, err := argInt(args, "limit")
	if err != nil {
		return Outcome{}, err
	}
	if !ok {
		lim = 50
	}
	if off < 0 || lim < 1 || lim > 500 {
		return Outcome{}, fmt.Errorf("offset must be >= 0 and limit in [1,500]: %w", ErrInvalidArgs)
	}
	end := min(off+lim, len(t.Rows))
	rows := []map[string]any{}
	for i := off; i < end; i++ {
		rows = append(rows, t.rowMap(t.Rows[i]))
	}
	d := t.Describe()
	d["rows"], d["offset"] = rows, off
	return Outcome{Value: d}, nil
}

func (t Table) rowMap(r TableRow) map[string]any {
	m := map[string]any{"key": r.Key}
	cells := map[string]any{}
	for i, c := range t.Columns {
		if i < len(r.Cells) {
			cells[c.Key] = r.Cells[i]
		}
	}
	m["cells"] = cells
	return m
}

// Describe implements Describer.
func (t Table) Describe() map[string]any {
	cols := make([]map[string]any, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = map[string]any{"key": c.Key, "title": c.Title, "sortable": c.Sortable}
	}
	return map[string]any{"columns": cols, "total": len(t.Rows), "selected": t.Selected,
		"sort": map[string]any{"column": t.SortColumn, "direction": t.SortDirection}, "disabled": t.Disabled}
}

// TreeItem is a node of a Tree widget.
type TreeItem struct {
	ID, Label string
	Expanded  bool
	Children  []TreeItem
}

// Tree shows a hierarchy of items; Selected is the selected item's id.
type Tree struct {
	ID       string
	Items    []TreeItem
	Selected string
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (t Tree) Kind() string { return "tree" }

// WidgetID implements Node.
func (t Tree) WidgetID() string { return t.ID }

// Excluded implements Excluder.
func (t Tree) Excluded() bool { return t.Exclude }

// Actions implements ToolProvider.
func (t Tree) Actions() []Action {
	if t.Disabled {
		return nil
	}
	node := objectSchema([]string{"node"}, map[string]any{"node": prop("string", "The tree node's id.")})
	return []Action{
		{Name: "expand", Description: "Expand a tree node to show its children.", Schema: node, Write: true},
		{Name: "collapse", Description: "Collapse a tree node to hide its children.", Schema: node, Write: true},
		{Name: "select_node", Description: "Select a tree node.", Schema: node, Write: true},
	}
}

// Perform implements ToolProvider.
func (t Tree) Perform(action string, args map[string]any) (Outcome, error) {
	if action != "expand" && action != "collapse" && action != "select_node" {
		return Outcome{}, unknownAction(t.Kind(), action)
	}
	id, err := requireString(args, "node")
	if err != nil {
		return Outcome{}, err
	}
	it, ok := findItem(t.Items, id)
	if !ok {
		return Outcome{}, fmt.Errorf("no tree node %q: %w", id, ErrInvalidArgs)
	}
	switch action {
	case "expand":
		if len(it.Children) == 0 {
			return Outcome{}, fmt.Errorf("tree node %q has no children: %w", id, ErrInvalidArgs)
		}
		return Outcome{Msg: Expand{Widget: t.ID, Node: id}}, nil
	case "collapse":
		return Outcome{Msg: Collapse{Widget: t.ID, Node: id}}, nil
	default:
		return Outcome{Msg: SelectNode{Widget: t.ID, Node: id}}, nil
	}
}

func findItem(items []TreeItem, id string) (TreeItem, bool) {
	for _, it := range items {
		if it.ID == id {
			return it, true
		}
		if c, ok := findItem(it.Children, id); ok {
			return c, true
		}
	}
	return TreeItem{}, false
}

// Describe implements Describer. Children of collapsed items are omitted.
func (t Tree) Describe() map[string]any {
	return map[string]any{"items": describeItems(t.Items), "selected": t.Selected, "disabled": t.Disabled}
}

func describeItems(items []TreeItem) []map[string]any {
	out := make([]map[string]any, len(items))
	for i, it := range items {
		m := map[string]any{"id": it.ID, "label": it.Label, "expanded": it.Expanded, "has_children": len(it.Children) > 0}
		if it.Expanded && len(it.Children) > 0 {
			m["children"] = describeItems(it.Children)
		}
		out[i] = m
	}
	return out
}

// Viewport is a scrolling window of Height lines over Total lines of content.
type Viewport struct {
	ID       string
	Offset   int
	Height   int
	Total    int
	Content  []Node
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (v Viewport) Kind() string { return "viewport" }

// WidgetID implements Node.
func (v Viewport) WidgetID() string { return v.ID }

// Excluded implements Excluder.
func (v Viewport) Excluded() bool { return v.Exclude }

// Children implements Container.
func (v Viewport) Children() []Node { return v.Content }

// Actions implements ToolProvider.
func (v Viewport) Actions() []Action {
	if v.Disabled {
		return nil
	}
	return []Action{
		{Name: "scroll_to", Description: "Scroll a viewport so the given line is at its top.",
			Schema: objectSchema([]string{"offset"}, map[string]any{
				"offset": map[string]any{"type": "integer", "minimum": 0, "description": "The 0-based line."},
			}), Write: true},
		{Name: "get_visible_range", Description: "Read which lines a viewport shows.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (v Viewport) Perform(action string, args map[string]any) (Outcome, error) {
	switch action {
	case "scroll_to":
		off, ok, err := argInt(args, "offset")
		if err != nil {
			return Outcome{}, err
		}
		if !ok {
			return Outcome{}, fmt.Errorf("argument \"offset\" is required: %w", ErrInvalidArgs)
		}
		if maxOff := max(0, v.Total-v.Height); off < 0 || off > maxOff {
			return Outcome{}, fmt.Errorf("offset %d out of range [0,%d]: %w", off, maxOff, ErrInvalidArgs)
		}
		return Outcome{Msg: ScrollTo{Widget: v.ID, Offset: off}}, nil
	case "get_visible_range":
		return Outcome{Value: v.Describe()}, nil
	}
	return Outcome{}, unknownAction(v.Kind(), action)
}

// Describe implements Describer.
func (v Viewport) Describe() map[string]any {
	return map[string]any{"start": v.Offset, "end": min(v.Offset+v.Height, v.Total), "total": v.Total, "disabled": v.Disabled}
}

// Scrubber is a media position control over Duration seconds.
type Scrubber struct {
	ID       string
	Position float64
	Duration float64
	Playing  bool
	Disabled bool
	Exclude  bool
}

// Kind implements Node.
func (s Scrubber) Kind() string { return "scrubber" }

// WidgetID implements Node.
func (s Scrubber) WidgetID() string { return s.ID }

// Excluded implements Excluder.
func (s Scrubber) Excluded() bool { return s.Exclude }

// Actions implements ToolProvider.
func (s Scrubber) Actions() []Action {
	if s.Disabled {
		return nil
	}
	return []Action{
		{Name: "seek", Description: "Move a scrubber to a position in seconds.",
			Schema: objectSchema([]string{"position"}, map[string]any{
				"position": map[string]any{"type": "number", "minimum": 0, "description": "Seconds from the start."},
			}), Write: true},
		{Name: "play", Description: "Start playback.", Schema: noArgs(), Write: true},
		{Name: "pause", Description: "Pause playback.", Schema: noArgs(), Write: true},
		{Name: "get_position", Description: "Read the position, duration and playing state.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (s Scrubber) Perform(action string, args map[string]any) (Outcome, error) {
	switch action {
	case "seek":
		p, ok, err := argNumber(args, "position")
		if err != nil {
			return Outcome{}, err
		}
		if !ok {
			return Outcome{}, fmt.Errorf("argument \"position\" is required: %w", ErrInvalidArgs)
		}
		if p < 0 || p > s.Duration {
			return Outcome{}, fmt.Errorf("position %g out of range [0,%g]: %w", p, s.Duration, ErrInvalidArgs)
		}
		return Outcome{Msg: Seek{Widget: s.ID, Position: p}}, nil
	case "play":
		return Outcome{Msg: Play{Widget: s.ID}}, nil
	case "pause":
		return Outcome{Msg: Pause{Widget: s.ID}}, nil
	case "get_position":
		return Outcome{Value: s.Describe()}, nil
	}
	return Outcome{}, unknownAction(s.Kind(), action)
}

// Describe implements Describer.
func (s Scrubber) Describe() map[string]any {
	return map[string]any{"position": s.Position, "duration": s.Duration, "playing": s.Playing, "disabled": s.Disabled}
}

// Series is one named line of a chart.
type Series struct {
	Name   string
	Points []float64
}

// Chart plots series; it offers reads only.
type Chart struct {
	ID      string
	Title   string
	Series  []Series
	Exclude bool
}

// Kind implements Node.
func (c Chart) Kind() string { return "chart" }

// WidgetID implements Node.
func (c Chart) WidgetID() string { return c.ID }

// Excluded implements Excluder.
func (c Chart) Excluded() bool { return c.Exclude }

// Actions implements ToolProvider.
func (c Chart) Actions() []Action {
	return []Action{
		{Name: "get_data", Description: "Read the series a chart plots.", Schema: noArgs()},
		{Name: "get_range", Description: "Read the minimum and maximum of a chart's values.", Schema: noArgs()},
	}
}

// Perform implements ToolProvider.
func (c Chart) Perform(action string, _ map[string]any) (Outcome, error) {
	switch action {
	case "get_data":
		series := make([]map[string]any, len(c.Series))
		for i, s := range c.Series {
			pts := s.Points
			if pts == nil {
				pts = []float64{}
			}
			series[i] = map[string]any{"name": s.Name, "points": pts}
		}
		return Outcome{Value: map[string]any{"title": c.Title, "series": series}}, nil
	case "get_range":
		return Outcome{Value: c.Describe()}, nil
	}
	return Outcome{}, unknownAction(c.Kind(), action)
}

// Describe implements Describer.
func (c Chart) Describe() map[string]any {
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, s := range c.Series {
		for _, p := range s.Points {
			lo, hi, n = math.Min(lo, p), math.Max(hi, p), n+1
		}
	}
	d := map[string]any{"title": c.Title, "count": n, "min": nil, "max": nil}
	if n > 0 {
		d["min"], d["max"] = lo, hi
	}
	return d
}
