package session

import (
	"encoding/json"
	"fmt"
	"math"
)

// Node is one element of a view tree. Kind names the widget kind ("button",
// "column", ...) and WidgetID its id ("" for anonymous nodes).
type Node interface {
	Kind() string
	WidgetID() string
}

// Container is a Node with children. Containers are transparent to
// derivation: their children's tools are derived as if they stood alone.
type Container interface {
	Node
	Children() []Node
}

// ToolProvider is a Node that offers actions, the source of derived tools.
// Apps may implement it for their own widget kinds.
//
// Actions lists what the widget offers in its current state (nothing when
// disabled); its names, descriptions and schemas must not depend on app text
// other than through sanitised schema values. Perform runs one action with
// the caller's arguments and must be pure: a write returns the message for
// Update, a read returns its answer.
type ToolProvider interface {
	Node
	Actions() []Action
	Perform(action string, args map[string]any) (Outcome, error)
}

// Excluder is implemented by widgets that can opt out of derivation. A
// widget whose Excluded returns true derives no tools of its own; its
// children still do.
type Excluder interface {
	Excluded() bool
}

// Describer is implemented by widgets that report their state for the
// widgets resource and the context tree. It must not include the value of
// masked or password fields.
type Describer interface {
	Describe() map[string]any
}

// Action describes one action a ToolProvider offers.
type Action struct {
	// Name becomes the last segment of the tool name: ^[a-z][a-z0-9_]{0,31}$.
	Name string
	// Description is static per provider kind and action (never app text).
	Description string
	// Schema is the JSON Schema of the arguments; nil means no arguments.
	Schema map[string]any
	// Write marks an action that changes app state: it is delivered to
	// Update and its tool is annotated sensitive.
	Write bool
	// Destructive marks a write that destroys data (destructiveHint).
	Destructive bool
	// StartsCommand marks a write whose update starts a command
	// (WithCommand), work that outlives the update: its tool is offered
	// as one that may run as a task (Tool.Task).
	StartsCommand bool
}

// Outcome is what Perform returns: Msg for a write (delivered to Update),
// Value for a read (returned to the caller).
type Outcome struct {
	Msg   Msg
	Value any
}

// Key is a key press sent with Manager.SendKey.
type Key struct {
	Key              string
	Ctrl, Alt, Shift bool
}

// Messages delivered to Update by the built-in widgets' write actions. Each
// names the widget it came from. Button's click delivers the button's own
// OnClick message instead.
type (
	// TypeInto asks to set a text input, password field or text area to Text.
	TypeInto struct{ Widget, Text string }
	// Clear asks to empty a text input, password field or text area.
	Clear struct{ Widget string }
	// Select asks a select list or menu to select Value (at Index).
	Select struct {
		Widget, Value string
		Index         int
	}
	// Toggle asks a checkbox to become Checked (the flip of its current value).
	Toggle struct {
		Widget  string
		Checked bool
	}
	// SelectTab asks tabs to select Tab (at Index).
	SelectTab struct {
		Widget, Tab string
		Index       int
	}
	// Confirm is a modal's confirmation.
	Confirm struct{ Widget string }
	// Dismiss is a modal's dismissal.
	Dismiss struct{ Widget string }
	// SelectRow asks a table to select the row at Row (in displayed order)
	// whose key is Key.
	SelectRow struct {
		Widget, Key string
		Row         int
	}
	// Sort asks a table to sort by Column in Direction ("asc" or "desc").
	Sort struct{ Widget, Column, Direction string }
	// Expand asks a tree to expand node Node.
	Expand struct{ Widget, Node string }
	// Collapse asks a tree to collapse node Node.
	Collapse struct{ Widget, Node string }
	// SelectNode asks a tree to select node Node.
	SelectNode struct{ Widget, Node string }
	// ScrollTo asks a viewport to scroll to line Offset.
	ScrollTo struct {
		Widget string
		Offset int
	}
	// Seek asks a scrubber to move to Position (seconds).
	Seek struct {
		Widget   string
		Position float64
	}
	// Play asks a scrubber to start playing.
	Play struct{ Widget string }
	// Pause asks a scrubber to pause.
	Pause struct{ Widget string }
	// KeyPress delivers a key sent with Manager.SendKey. Focus is the id of
	// the widget the session's last write action went to ("" before any),
	// so an app can route keys to it.
	KeyPress struct {
		Key   Key
		Focus string
	}
)

// schema helpers, used by the built-in widgets.

func objectSchema(required []string, props map[string]any) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		req := make([]any, len(required))
		for i, r := range required {
			req[i] = r
		}
		s["required"] = req
	}
	return s
}

func prop(typ, desc string) map[string]any {
	return map[string]any{"type": typ, "description": desc}
}

// noArgs is the schema of an action without arguments; nil encodes as an
// empty object schema without a cleaning pass.
func noArgs() map[string]any { return nil }

// argument helpers: JSON numbers arrive as float64, Go callers may pass ints.

func argString(args map[string]any, key string) (string, bool, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", true, fmt.Errorf("argument %q must be a string: %w", key, ErrInvalidArgs)
	}
	return s, true, nil
}

func argNumber(args map[string]any, key string) (float64, bool, error) {
	v, ok := args[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case int32:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, true, fmt.Errorf("argument %q must be a number: %w", key, ErrInvalidArgs)
		}
		f = x
	default:
		return 0, true, fmt.Errorf("argument %q must be a number: %w", key, ErrInvalidArgs)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, fmt.Errorf("argument %q must be finite: %w", key, ErrInvalidArgs)
	}
	return f, true, nil
}

func argInt(args map[string]any, key string) (int, bool, error) {
	f, ok, err := argNumber(args, key)
	if err != nil || !ok {
		return 0, ok, err
	}
	if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return 0, true, fmt.Errorf("argument %q must be an integer: %w", key, ErrInvalidArgs)
	}
	return int(f), true, nil
}

func requireString(args map[string]any, key string) (string, error) {
	s, ok, err := argString(args, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("argument %q is required: %w", key, ErrInvalidArgs)
	}
	return s, nil
}

func unknownAction(kind, action string) error {
	return fmt.Errorf("%s has no action %q: %w", kind, action, ErrWidget)
}

// pick resolves a choice among labels by "value" (label) or "index".
func pick(labels []string, args map[string]any, valueKey string) (int, error) {
	s, hasS, err := argString(args, valueKey)
	if err != nil {
		return 0, err
	}
	i, hasI, err := argInt(args, "index")
	if err != nil {
		return 0, err
	}
	switch {
	case hasS:
		for j, l := range labels {
			if l == s {
				if hasI && i != j {
					return 0, fmt.Errorf("%s %q is not at index %d: %w", valueKey, s, i, ErrInvalidArgs)
				}
				return j, nil
			}
		}
		return 0, fmt.Errorf("no %s %q: %w", valueKey, s, ErrInvalidArgs)
	case hasI:
		if i < 0 || i >= len(labels) {
			return 0, fmt.Errorf("index %d out of range [0,%d): %w", i, len(labels), ErrInvalidArgs)
		}
		return i, nil
	default:
		return 0, fmt.Errorf("argument %q or \"index\" is required: %w", valueKey, ErrInvalidArgs)
	}
}
