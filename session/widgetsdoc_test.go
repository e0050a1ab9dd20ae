package session

import (
	"encoding/json"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// oddNode is a custom widget whose names and state need JSON escaping.
type oddNode struct{ id, kind, action string }

func (o oddNode) Kind() string     { return o.kind }
func (o oddNode) WidgetID() string { return o.id }
func (o oddNode) Actions() []Action {
	return []Action{{Name: o.action}, {Name: "plain"}}
}
func (o oddNode) Perform(string, map[string]any) (Outcome, error) { return Outcome{}, nil }
func (o oddNode) Describe() map[string]any {
	return map[string]any{"html": "<b>&</b>", "n": 1.5, "nested": map[string]any{"z": nil, "a": []any{"\u2028"}}}
}

// widgetsViews are views covering every built-in kind, exclusion, nil
// children, escaping, and a view nesting past MaxViewDepth.
func widgetsViews() map[string]Node {
	every := Column{Items: []Node{
		Button{ID: "b"}, Button{ID: "x", Exclude: true}, nil, TextInput{ID: "ti", Value: "shown"}, TextInput{ID: "tm", Value: "hidden1", Mask: '*'},
		PasswordField{ID: "p", Value: "hidden2"}, TextArea{ID: "ta", Value: "area"},
		SelectList{ID: "sl", Options: []string{"o"}}, Checkbox{ID: "c"}, Tabs{ID: "tb", Tabs: []string{"x"}},
		Menu{ID: "m", Items: []string{"i"}}, Modal{ID: "md", Content: []Node{Text{Text: "in modal"}}},
		Table{ID: "t"}, Tree{ID: "tr", Items: []TreeItem{{ID: "r", Expanded: true, Children: []TreeItem{{ID: "c1"}}}}},
		Viewport{ID: "v"}, Scrubber{ID: "s"}, Chart{ID: "ch"},
		Row{Items: []Node{Text{Text: "t<\"quoted\">"}, Box{Title: "bx"}, Progress{Max: 1}, StatusBar{Items: []string{"st"}}}},
		Row{}, Column{Items: []Node{nil}},
		Button{ID: "esc", Label: "<\"a\\b\">&\u2028\xff", Disabled: true}, Text{Text: "\x01\t\u00e9"}, Box{Title: "</script>"},
	}}
	odd := Column{Items: []Node{
		oddNode{id: "w\u202eid", kind: "k\"ind<>", action: "a\\b"},
		oddNode{id: "", kind: "plain", action: "é"},
	}}
	counter := Column{Items: []Node{
		Text{ID: "count", Text: "Count: 5"},
		Row{Items: []Node{Button{ID: "dec", Label: "-", OnClick: 1}, Button{ID: "inc", Label: "+", OnClick: 2}, Button{ID: "reset", Label: "Reset", OnClick: 3}}},
	}}
	return map[string]Node{"every kind": every, "counter": counter, "escaping": odd, "self-containing": loop{}, "text alone": Text{Text: "x"}, "nil": nil}
}

// The widgets resource is encoded without building WidgetTree's maps; its
// bytes must be exactly what encoding the map gave, for every view.
func TestWidgetsDocEncodesWidgetTreeExactly(t *testing.T) {
	for name, view := range widgetsViews() {
		want, err := json.Marshal(WidgetTree(view))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := widgetsDoc(view, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", name, got)
		}
	}
}

// badState is a widget whose state JSON cannot encode.
type badState struct{}

func (badState) Kind() string             { return "bad" }
func (badState) WidgetID() string         { return "bad" }
func (badState) Describe() map[string]any { return map[string]any{"f": func() {}} }

func TestWidgetsDocRefusesUnencodableState(t *testing.T) {
	_, err := widgetsDoc(Column{Items: []Node{badState{}}}, 0)
	if err == nil || !strings.Contains(err.Error(), `widget "bad"`) {
		t.Errorf("err = %v, want one naming the widget", err)
	}
}

// BenchmarkWidgetsResource compares encoding the widgets resource through
// WidgetTree's maps (the old path, as baseline) with widgetsDoc.
func BenchmarkWidgetsResource(b *testing.B) {
	for _, name := range []string{"counter", "every kind"} {
		b.Run(name, func(b *testing.B) { benchWidgetsResource(b, widgetsViews()[name]) })
	}
}

func benchWidgetsResource(b *testing.B, view Node) {
	b.Run("map+json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(WidgetTree(view)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("widgetsDoc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := widgetsDoc(view, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSnapshotEncoding encodes a counter session's snapshot: every
// field (the old path, as baseline) against info and tools encoded once,
// through json.Marshal (as the node's store calls it) and MarshalJSON.
func BenchmarkSnapshotEncoding(b *testing.B) {
	set := newSticky("c", 0)
	set.add(Derive("c", widgetsViews()["counter"]).Tools)
	info := Info{ID: "c", App: "counter", Principal: "p", Status: "running"}
	parts, err := encodeParts(info, set)
	if err != nil {
		b.Fatal(err)
	}
	model := json.RawMessage(`{"count":5}`)
	plain := Snapshot{Info: info, Model: model, Tools: set.tools}
	spliced := plain
	spliced.enc = parts
	for _, c := range []struct {
		name string
		enc  func() ([]byte, error)
	}{
		{"every field", func() ([]byte, error) { return json.Marshal(plain) }},
		{"parts/json.Marshal", func() ([]byte, error) { return json.Marshal(spliced) }},
		{"parts/MarshalJSON", spliced.MarshalJSON},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.enc(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The built-in widgets that append their own state write what encoding
// their Describe map writes, for any string.
func TestPropAppendedStateIsDescribeEncoded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.String(), rapid.StringN(0, 8, -1), rapid.SampledFrom([]string{"<>&", "\u2028\u2029", "\xff", `"\`})).Draw(t, "s")
		for _, w := range []interface {
			Describer
			stateAppender
		}{Button{Label: s, Disabled: rapid.Bool().Draw(t, "disabled")}, Text{Text: s}, Box{Title: s}} {
			want, err := json.Marshal(w.Describe())
			if err != nil {
				t.Fatal(err)
			}
			if got := w.appendState(nil); string(got) != string(want) {
				t.Fatalf("%T: %s, Describe encodes %s", w, got, want)
			}
		}
	})
}
