package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Result is a tool call's answer. IsError marks a tool-level error the agent
// should see (a widget gone from the view, refused arguments, a failed
// update), as opposed to the error return of Manager.Call.
type Result struct {
	Text       string `json:"text"`
	Structured any    `json:"structured,omitempty"`
	IsError    bool   `json:"isError"`
}

// WidgetError is a call to a widget that cannot take it as the view is now.
// It matches ErrWidget with errors.Is and never counts toward a tool's
// circuit breaker.
type WidgetError struct {
	Widget, Problem string
}

// Error implements error.
func (e *WidgetError) Error() string { return "widget `" + e.Widget + "` " + e.Problem }

// Is reports whether target is ErrWidget.
func (e *WidgetError) Is(target error) bool { return target == ErrWidget }

// walkUntil visits n and its descendants depth-first until visit returns
// true; it reports whether it stopped early.
func walkUntil(n Node, depth int, visit func(Node) bool) bool {
	if n == nil || depth >= MaxViewDepth {
		return false
	}
	if visit(n) {
		return true
	}
	if c, ok := n.(Container); ok {
		for _, ch := range c.Children() {
			if walkUntil(ch, depth+1, visit) {
				return true
			}
		}
	}
	return false
}

// Locate finds the widget a tool acts on as the view is now: the first
// ToolProvider with the tool's widget id and kind that offers the action. The
// error, wrapping ErrWidget, names the widget id when it is gone, no longer
// offers the action or is now of another kind.
func Locate(view Node, t Tool) (ToolProvider, error) {
	var (
		found     ToolProvider
		otherKind string
		noAction  bool
	)
	walkUntil(view, 0, func(n Node) bool {
		if n.WidgetID() != t.Widget {
			return false
		}
		p, ok := n.(ToolProvider)
		if !ok || Sanitize(n.Kind()) != t.Kind {
			if otherKind == "" {
				otherKind = Sanitize(n.Kind())
			}
			return false
		}
		if ex, ok := n.(Excluder); ok && ex.Excluded() {
			noAction = true
			return false
		}
		if !slices.ContainsFunc(p.Actions(), func(a Action) bool { return a.Name == t.Action }) {
			noAction = true
			return false
		}
		found = p
		return true
	})
	switch {
	case found != nil:
		return found, nil
	case noAction:
		return nil, &WidgetError{Widget: t.Widget, Problem: fmt.Sprintf("no longer offers `%s`", t.Action)}
	case otherKind != "":
		return nil, &WidgetError{Widget: t.Widget, Problem: fmt.Sprintf("is now a %s, not a %s", otherKind, t.Kind)}
	default:
		return nil, &WidgetError{Widget: t.Widget, Problem: "is not in the session's current view"}
	}
}

// Invoke runs tool t against view as it is now. For a read it returns the
// answer; for a write it returns the message to deliver to Update. It is pure.
func Invoke(view Node, t Tool, args map[string]any) (Outcome, error) {
	p, err := Locate(view, t)
	if err != nil {
		return Outcome{}, err
	}
	out, err := p.Perform(t.Action, args)
	if werr := (*WidgetError)(nil); errors.As(err, &werr) {
		return Outcome{}, werr
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("%s `%s`: %w", t.Action, t.Widget, err)
	}
	if t.Sensitive && out.Msg == nil {
		return Outcome{}, &WidgetError{Widget: t.Widget, Problem: fmt.Sprintf("produced no message for `%s`", t.Action)}
	}
	return out, nil
}

// Discover searches tools for every word of query (case-insensitive) in a
// tool's name, widget, action, kind or description. An empty query matches
// every tool.
func Discover(tools []Tool, query string) []Tool {
	words := strings.Fields(strings.ToLower(query))
	var out []Tool
	for _, t := range tools {
		hay := strings.ToLower(strings.Join([]string{t.Name, t.Widget, t.Action, t.Kind, t.Description}, " "))
		match := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				match = false
				break
			}
		}
		if match {
			out = append(out, t)
		}
	}
	return out
}

func discoverResult(tools []Tool, args map[string]any) Result {
	q, _, err := argString(args, "query")
	if err != nil {
		return errorResult(err)
	}
	found := Discover(tools, q)
	list := make([]map[string]any, len(found))
	var b strings.Builder
	for i, t := range found {
		list[i] = map[string]any{"name": t.Name, "description": t.Description, "read_only": t.ReadOnly}
		fmt.Fprintf(&b, "%s: %s\n", t.Name, t.Description)
	}
	if len(found) == 0 {
		b.WriteString("no tools match")
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n"), Structured: map[string]any{"tools": list}}
}

func valueResult(v any) Result {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResult(fmt.Errorf("encoding answer: %w", err))
	}
	return Result{Text: string(b), Structured: v}
}

func errorResult(err error) Result {
	return Result{Text: err.Error(), IsError: true}
}
