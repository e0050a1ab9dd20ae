package session

// Text is a line (or lines) of static text.
type Text struct {
	ID   string
	Text string
}

// Kind implements Node.
func (t Text) Kind() string { return "text" }

// WidgetID implements Node.
func (t Text) WidgetID() string { return t.ID }

// Describe implements Describer.
func (t Text) Describe() map[string]any { return map[string]any{"text": t.Text} }

// Column stacks its children vertically.
type Column struct {
	ID    string
	Items []Node
}

// Kind implements Node.
func (c Column) Kind() string { return "column" }

// WidgetID implements Node.
func (c Column) WidgetID() string { return c.ID }

// Children implements Container.
func (c Column) Children() []Node { return c.Items }

// Row lays its children out side by side.
type Row struct {
	ID    string
	Items []Node
}

// Box frames its children with a border and an optional title.
type Box struct {
	ID    string
	Title string
	Items []Node
}

// Kind implements Node.
func (b Box) Kind() string { return "box" }

// WidgetID implements Node.
func (b Box) WidgetID() string { return b.ID }

// Children implements Container.
func (b Box) Children() []Node { return b.Items }

// Describe implements Describer.
func (b Box) Describe() map[string]any { return map[string]any{"title": b.Title} }

// Progress shows Value out of Max.
type Progress struct {
	ID         string
	Label      string
	Value, Max float64
}

// Kind implements Node.
func (p Progress) Kind() string { return "progress" }

// WidgetID implements Node.
func (p Progress) WidgetID() string { return p.ID }

// Describe implements Describer.
func (p Progress) Describe() map[string]any {
	return map[string]any{"label": p.Label, "value": p.Value, "max": p.Max}
}

// StatusBar is a one-line bar of status items.
type StatusBar struct {
	ID    string
	Items []string
}

// Kind implements Node.
func (s StatusBar) Kind() string { return "status_bar" }

// WidgetID implements Node.
func (s StatusBar) WidgetID() string { return s.ID }

// Describe implements Describer.
func (s StatusBar) Describe() map[string]any { return map[string]any{"items": nonNil(s.Items)} }

// Kind implements Node.
func (r Row) Kind() string { return "row" }

// WidgetID implements Node.
func (r Row) WidgetID() string { return r.ID }

// Children implements Container.
func (r Row) Children() []Node { return r.Items }
