package session

// Rederive is Derive for a view whose previous derivation was prev: when
// the view has the same shape, every tool it derives equal to prev's in
// the same order, it returns prev itself without building a tool, a name
// or a map (most updates change what widgets show, not which tools they
// offer). Otherwise it derives view afresh. It is pure.
//
// Only built-in widgets are checked in place: their action schemas are
// static per kind and action, so an equal kind and action means an equal
// schema. A view with another ToolProvider, or whose derivation warned, is
// always derived afresh.
func Rederive(session string, view Node, prev Derivation) Derivation {
	if prev.Tools == nil || len(prev.Warnings) > 0 || !sameShape(session, view, prev.Tools) {
		return Derive(session, view)
	}
	return prev
}

// sameShape reports whether deriving view would give exactly tools.
func sameShape(session string, view Node, tools []Tool) bool {
	i, same := 0, true
	truncated := walk(view, 0, func(n Node) {
		if !same {
			return
		}
		p, ok := n.(ToolProvider)
		if !ok {
			return
		}
		if ex, ok := n.(Excluder); ok && ex.Excluded() {
			return
		}
		acts := p.Actions()
		if len(acts) == 0 {
			return
		}
		if !builtin(n) {
			same = false
			return
		}
		id := p.WidgetID()
		kind := Sanitize(p.Kind())
		for _, a := range acts {
			if i >= len(tools) {
				same = false
				return
			}
			t := &tools[i]
			i++
			// Names are checked piecewise: building them is what this
			// path avoids. A valid id and action never need sanitising.
			if t.Widget != id || t.Action != a.Name || t.Kind != kind || !ValidID(id) || !ValidAction(a.Name) ||
				!isToolName(t.Name, session, id, a.Name) || t.Session != session || t.Description != Sanitize(a.Description) ||
				t.ReadOnly != !a.Write || t.Sensitive != a.Write || t.Destructive != (a.Write && a.Destructive) {
				same = false
				return
			}
		}
	})
	return same && !truncated && i == len(tools)
}

// isToolName reports whether name is session + "." + id + "." + action,
// without building that string.
func isToolName(name, session, id, action string) bool {
	if len(name) != len(session)+len(id)+len(action)+2 {
		return false
	}
	i := len(session)
	j := i + 1 + len(id)
	return name[:i] == session && name[i] == '.' && name[i+1:j] == id && name[j] == '.' && name[j+1:] == action
}
