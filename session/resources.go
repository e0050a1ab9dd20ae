package session

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Resource names every session offers, besides model/<key> per projection.
const (
	ResourceWidgets = "widgets"
	ResourceContext = "context"
)

// WidgetTree describes view for the widgets resource: each node's kind, id,
// offered actions, state (from Describer, which never includes masked
// values) and children. The widgets resource itself is encoded by
// appendWidgets, which writes the same JSON without building this map.
func WidgetTree(view Node) map[string]any { return widgetTree(view, 0) }

func widgetTree(view Node, depth int) map[string]any {
	if view == nil || depth >= MaxViewDepth {
		return nil
	}
	m := map[string]any{"kind": Sanitize(view.Kind())}
	if id := view.WidgetID(); id != "" {
		m["id"] = Sanitize(id)
	}
	if p, ok := view.(ToolProvider); ok {
		names := []string{}
		if ex, ok := view.(Excluder); !ok || !ex.Excluded() {
			for _, a := range p.Actions() {
				names = append(names, a.Name)
			}
		}
		m["actions"] = names
	}
	if d, ok := view.(Describer); ok {
		m["state"] = d.Describe()
	}
	if c, ok := view.(Container); ok {
		kids := make([]map[string]any, 0, len(c.Children()))
		for _, ch := range c.Children() {
			if k := widgetTree(ch, depth+1); k != nil {
				kids = append(kids, k)
			}
		}
		m["children"] = kids
	}
	return m
}

// widgetsDoc encodes the widgets resource of view: byte for byte what
// json.Marshal(WidgetTree(view)) writes, without the intermediate maps and
// slices (they were a tenth of the bytes a click allocated).
// sizeHint is the expected length (the previous render's), so the
// buffer is allocated once.
func widgetsDoc(view Node, sizeHint int) (json.RawMessage, error) {
	if view == nil {
		return json.RawMessage("null"), nil
	}
	return appendWidgets(make([]byte, 0, max(sizeHint+sizeHint/8, 256)), view, 0)
}

// appendWidgets appends view's node as widgetTree describes it, with keys
// in encoding/json's map order: actions, children, id, kind, state. The
// caller skips nil nodes and nodes at MaxViewDepth.
func appendWidgets(b []byte, view Node, depth int) ([]byte, error) {
	b = append(b, '{')
	if p, ok := view.(ToolProvider); ok {
		b = append(b, `"actions":[`...)
		if ex, ok := view.(Excluder); !ok || !ex.Excluded() {
			for i, a := range p.Actions() {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, a.Name)
			}
		}
		b = append(b, "],"...)
	}
	if c, ok := view.(Container); ok {
		b = append(b, `"children":[`...)
		first := true
		if depth+1 < MaxViewDepth {
			for _, ch := range c.Children() {
				if ch == nil {
					continue
				}
				if !first {
					b = append(b, ',')
				}
				first = false
				var err error
				if b, err = appendWidgets(b, ch, depth+1); err != nil {
					return nil, err
				}
			}
		}
		b = append(b, "],"...)
	}
	if id := view.WidgetID(); id != "" {
		b = append(b, `"id":`...)
		b = appendJSONString(b, Sanitize(id))
		b = append(b, ',')
	}
	b = append(b, `"kind":`...)
	b = appendJSONString(b, Sanitize(view.Kind()))
	if sa, ok := view.(stateAppender); ok {
		b = append(b, `,"state":`...)
		b = sa.appendState(b)
	} else if d, ok := view.(Describer); ok {
		st, err := json.Marshal(d.Describe())
		if err != nil {
			return nil, fmt.Errorf("encoding the state of widget %q: %w", Sanitize(view.WidgetID()), err)
		}
		b = append(b, `,"state":`...)
		b = append(b, st...)
	}
	return append(b, '}'), nil
}

// stateAppender is a built-in widget that appends its state as JSON
// itself: the bytes of json.Marshal(Describe()), without the map. The most
// common widgets' Describe maps were the largest allocation left in a
// click.
type stateAppender interface {
	appendState(b []byte) []byte
}

func (b Button) appendState(buf []byte) []byte {
	buf = append(buf, `{"disabled":`...)
	buf = strconv.AppendBool(buf, b.Disabled)
	buf = append(buf, `,"label":`...)
	buf = appendJSONString(buf, b.Label)
	return append(buf, '}')
}

func (t Text) appendState(buf []byte) []byte {
	buf = append(buf, `{"text":`...)
	buf = appendJSONString(buf, t.Text)
	return append(buf, '}')
}

func (x Box) appendState(buf []byte) []byte {
	buf = append(buf, `{"title":`...)
	buf = appendJSONString(buf, x.Title)
	return append(buf, '}')
}

// projections returns the app's projections keyed by resource name
// ("model/<key>"), skipping keys that are not valid ids.
func projections(app App) []Projection {
	rp, ok := app.(ResourceProvider)
	if !ok {
		return nil
	}
	var out []Projection
	for _, p := range rp.Resources() {
		if ValidID(p.Key) && p.Project != nil {
			out = append(out, p)
		}
	}
	return out
}

// project evaluates every projection of m as JSON, recovering a panic.
func project(ps []Projection, m Model) (out map[string]json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("projecting model: panic: %v", r)
		}
	}()
	out = make(map[string]json.RawMessage, len(ps))
	for _, p := range ps {
		b, err := json.Marshal(p.Project(m))
		if err != nil {
			return nil, fmt.Errorf("projecting model/%s: %w", p.Key, err)
		}
		out["model/"+p.Key] = b
	}
	return out, nil
}

// contextDoc assembles the context resource. It splices the already
// encoded widgets and projections in rather than re-encoding them, and
// writes names as JSON strings directly when they need no escaping (tool
// names and projection keys are validated ids), so a render does not
// allocate per tool.
func contextDoc(sess json.RawMessage, projected map[string]json.RawMessage, widgets json.RawMessage, tools []Tool) []byte {
	if len(widgets) == 0 {
		widgets = json.RawMessage("null")
	}
	size := len(sess) + len(widgets) + 64
	for k, v := range projected {
		size += len(k) + len(v) + 4
	}
	for _, t := range tools {
		size += len(t.Name) + 3
	}
	b := make([]byte, 0, size)
	b = append(b, `{"session":`...)
	b = append(b, sess...)
	b = append(b, `,"projections":{`...)
	for i, k := range slices.Sorted(maps.Keys(projected)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, strings.TrimPrefix(k, "model/"))
		b = append(b, ':')
		b = append(b, projected[k]...)
	}
	b = append(b, `},"widgets":`...)
	b = append(b, widgets...)
	b = append(b, `,"tools":[`...)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, t.Name)
	}
	return append(b, "]}"...)
}

// appendJSONString appends s encoded exactly as encoding/json encodes it:
// directly when it is printable ASCII that json escapes nowhere, through
// json.Marshal otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// sessionDoc is the session part of the context resource.
func sessionDoc(info Info) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": info.ID, "app": info.App, "status": info.Status, "created": info.Created})
	return b // strings and a time.Time always encode
}
