package session

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Tool is a derived tool definition, transport-neutral.
type Tool struct {
	// Name is "<session>.<widget>.<action>" or "<session>.discover_tools".
	Name    string `json:"name"`
	Session string `json:"session"`
	Widget  string `json:"widget"`
	Action  string `json:"action"`
	// Kind is the widget kind, e.g. "button" ("" for discover_tools).
	Kind        string `json:"kind"`
	Description string `json:"description"`
	// InputSchema is a sanitised JSON Schema object.
	InputSchema json.RawMessage `json:"inputSchema"`
	// ReadOnly marks read actions.
	ReadOnly bool `json:"readOnly"`
	// Sensitive marks write actions: they never run without an authorizer.
	Sensitive bool `json:"sensitive"`
	// Destructive marks writes that destroy data (destructiveHint).
	Destructive bool `json:"destructive"`
	// Task marks a write that starts a command (Action.StartsCommand): its
	// call may take long, so it may run as an MCP task (taskSupport
	// optional).
	Task bool `json:"task,omitempty"`
}

// Equal reports whether two tool definitions are identical.
func (t Tool) Equal(o Tool) bool {
	return t.Name == o.Name && t.Session == o.Session && t.Widget == o.Widget && t.Action == o.Action &&
		t.Kind == o.Kind && t.Description == o.Description && bytes.Equal(t.InputSchema, o.InputSchema) &&
		t.ReadOnly == o.ReadOnly && t.Sensitive == o.Sensitive && t.Destructive == o.Destructive &&
		t.Task == o.Task
}

// Warning reports a widget or action that derived no tool, and why.
type Warning struct {
	Widget, Action, Reason string
}

// String describes the warning in one line.
func (w Warning) String() string {
	if w.Action == "" {
		return fmt.Sprintf("widget %q: %s", w.Widget, w.Reason)
	}
	return fmt.Sprintf("widget %q action %q: %s", w.Widget, w.Action, w.Reason)
}

// Derivation is the result of deriving a view's tools: the tools in view
// order (the first widget with a given id and action wins) and warnings for
// what was refused.
type Derivation struct {
	Tools    []Tool
	Warnings []Warning
}

// Derive walks view and derives the tools of every ToolProvider with a valid
// id that is not excluded. It is pure: no I/O, no clocks. A session id that
// is not valid derives nothing and one warning.
func Derive(session string, view Node) Derivation {
	var d Derivation
	if !ValidID(session) {
		d.Warnings = append(d.Warnings, Warning{Reason: fmt.Sprintf("session id %q is not 1-32 characters of [A-Za-z0-9_-]; no tools derived", Sanitize(session))})
		return d
	}
	st := deriveState{seen: map[string]bool{}, schemas: map[string]json.RawMessage{}}
	if walk(view, 0, func(n Node) { deriveNode(session, n, &st, &d) }) {
		d.Warnings = append(d.Warnings, Warning{Reason: fmt.Sprintf("view nests deeper than %d levels; deeper widgets derive no tools", MaxViewDepth)})
	}
	return d
}

// Merge returns the tools of a followed by those of b not named in a: the
// derivation of a view whose parts derived a and b, in that order.
func Merge(a, b []Tool) []Tool {
	out := make([]Tool, 0, len(a)+len(b))
	seen := make(map[string]bool, len(a)+len(b))
	for _, ts := range [][]Tool{a, b} {
		for _, t := range ts {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// MaxViewDepth is how deeply a view may nest; deeper nodes are ignored by
// derivation, calls, resources and screenshots (a container that contains
// itself would otherwise recurse until the stack overflows).
const MaxViewDepth = 256

// walk visits n and its descendants depth-first, in order, skipping nil
// nodes; it reports whether it cut off nodes deeper than MaxViewDepth.
func walk(n Node, depth int, visit func(Node)) (truncated bool) {
	if n == nil {
		return false
	}
	if depth >= MaxViewDepth {
		return true
	}
	visit(n)
	if c, ok := n.(Container); ok {
		for _, ch := range c.Children() {
			if walk(ch, depth+1, visit) {
				truncated = true
			}
		}
	}
	return truncated
}

// deriveState is what one derivation remembers: the tool names taken and
// the cleaned schemas of built-in widget actions, which never depend on app
// data and so are cleaned once per kind and action.
type deriveState struct {
	seen    map[string]bool
	schemas map[string]json.RawMessage
}

// builtin reports whether n is one of this package's widgets, whose action
// schemas are static.
func builtin(n Node) bool {
	switch n.(type) {
	case Button, TextInput, PasswordField, TextArea, SelectList, Checkbox, Tabs, Menu, Modal,
		Table, Tree, Viewport, Scrubber, Chart:
		return true
	}
	return false
}

func (st *deriveState) schema(n Node, kind string, a Action) (json.RawMessage, error) {
	if !builtin(n) {
		return cleanSchema(a.Schema)
	}
	key := kind + "." + a.Name
	if s, ok := st.schemas[key]; ok {
		return s, nil
	}
	s, err := cleanSchema(a.Schema)
	if err == nil {
		st.schemas[key] = s
	}
	return s, err
}

func deriveNode(session string, n Node, st *deriveState, d *Derivation) {
	p, ok := n.(ToolProvider)
	if !ok {
		return
	}
	if ex, ok := n.(Excluder); ok && ex.Excluded() {
		return
	}
	id := p.WidgetID()
	acts := p.Actions()
	if len(acts) == 0 {
		return
	}
	if !ValidID(id) {
		d.Warnings = append(d.Warnings, Warning{Widget: Sanitize(id), Reason: "widget id is not 1-32 characters of [A-Za-z0-9_-]; no tools derived"})
		return
	}
	kind := Sanitize(p.Kind())
	for _, a := range acts {
		if !ValidAction(a.Name) {
			d.Warnings = append(d.Warnings, Warning{Widget: id, Action: Sanitize(a.Name), Reason: "action name does not match ^[a-z][a-z0-9_]{0,31}$; no tool derived"})
			continue
		}
		name := session + "." + id + "." + a.Name
		if st.seen[name] {
			continue
		}
		schema, err := st.schema(n, kind, a)
		if err != nil {
			d.Warnings = append(d.Warnings, Warning{Widget: id, Action: a.Name, Reason: err.Error() + "; no tool derived"})
			continue
		}
		st.seen[name] = true
		d.Tools = append(d.Tools, Tool{
			Name: name, Session: session, Widget: id, Action: a.Name, Kind: kind,
			Description: Sanitize(a.Description), InputSchema: schema,
			ReadOnly: !a.Write, Sensitive: a.Write, Destructive: a.Write && a.Destructive,
			Task: a.Write && a.StartsCommand,
		})
	}
}

// discoverTool is the per-session search tool.
func discoverTool(session string) Tool {
	return Tool{
		Name: session + ".discover_tools", Session: session, Action: "discover_tools",
		Description: "Search this session's tools by keyword (name, widget, action, kind or description).",
		InputSchema: json.RawMessage(`{"properties":{"query":{"description":"Keywords to search for; empty lists every tool.","type":"string"}},"type":"object"}`),
		ReadOnly:    true,
	}
}

// sticky is a session's tool set: every tool any render derived, in the
// order first seen. It is not safe for concurrent use.
type sticky struct {
	tools []Tool
	// index maps names to positions once the set has more than
	// smallSticky tools; a smaller set is searched in order. Most sessions
	// have a handful of tools, and Go maps of them cost an idle counter
	// session ~260 of its ~5,600 live bytes (BenchmarkIdleSessionOnANode).
	index map[string]int
	limit int // most tools kept; <= 0 means no limit
}

// smallSticky is the most tools a set searches in order, without an index.
const smallSticky = 16

func newSticky(session string, limit int) *sticky {
	s := &sticky{limit: limit}
	s.add([]Tool{discoverTool(session)})
	return s
}

// find returns the position of the tool named name.
func (s *sticky) find(name string) (int, bool) {
	if s.index != nil {
		i, ok := s.index[name]
		return i, ok
	}
	for i := range s.tools {
		if s.tools[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// add merges derived tools into the set and reports whether the set or a
// tool's definition changed, and how many new tools the limit refused.
func (s *sticky) add(tools []Tool) (changed bool, refused int) {
	for _, t := range tools {
		if i, ok := s.find(t.Name); ok {
			if !s.tools[i].Equal(t) {
				s.tools[i] = t
				changed = true
			}
			continue
		}
		if s.limit > 0 && len(s.tools) >= s.limit {
			refused++
			continue
		}
		s.tools = append(s.tools, t)
		switch {
		case s.index != nil:
			s.index[t.Name] = len(s.tools) - 1
		case len(s.tools) > smallSticky:
			s.index = make(map[string]int, len(s.tools))
			for i := range s.tools {
				s.index[s.tools[i].Name] = i
			}
		}
		changed = true
	}
	return changed, refused
}

func (s *sticky) get(name string) (Tool, bool) {
	i, ok := s.find(name)
	if !ok {
		return Tool{}, false
	}
	return s.tools[i], true
}
