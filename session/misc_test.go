package session

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	f := func() App { return miniCounter{} }
	if err := r.Register("b", "B\u202e app", f); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("a", "A", f); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		factory func() App
		want    error
	}{{"a", f, ErrExists}, {"bad.name", f, ErrInvalidID}, {"", f, ErrInvalidID}} {
		if err := r.Register(tt.name, "", tt.factory); !errors.Is(err, tt.want) {
			t.Errorf("Register(%q): %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := r.Register("c", "", nil); err == nil {
		t.Error("nil factory accepted")
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names() = %v", got)
	}
	if info, ok := r.Info("b"); !ok || info.Description != "B app" {
		t.Errorf("Info(b) = %+v (descriptions are sanitised)", info)
	}
	if err := r.SetDefaultStartable("a", "zz"); err == nil {
		t.Error("unregistered default accepted")
	}
	if _, ok := r.Lookup("zz"); ok {
		t.Error("Lookup of an unknown name")
	}
}

// Every built-in widget describes itself as JSON and never includes a
// masked value.
func TestWidgetTreeDescribesEveryKind(t *testing.T) {
	view := Column{Items: []Node{
		Button{ID: "b"}, TextInput{ID: "ti", Value: "shown"}, TextInput{ID: "tm", Value: "hidden1", Mask: '*'},
		PasswordField{ID: "p", Value: "hidden2"}, TextArea{ID: "ta", Value: "area"},
		SelectList{ID: "sl", Options: []string{"o"}}, Checkbox{ID: "c"}, Tabs{ID: "tb", Tabs: []string{"x"}},
		Menu{ID: "m", Items: []string{"i"}}, Modal{ID: "md", Content: []Node{Text{Text: "in modal"}}},
		Table{ID: "t"}, Tree{ID: "tr", Items: []TreeItem{{ID: "r", Expanded: true, Children: []TreeItem{{ID: "c1"}}}}},
		Viewport{ID: "v"}, Scrubber{ID: "s"}, Chart{ID: "ch"},
		Row{Items: []Node{Text{Text: "t"}, Box{Title: "bx"}, Progress{Max: 1}, StatusBar{Items: []string{"st"}}}},
	}}
	b, err := json.Marshal(WidgetTree(view))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{`"shown"`, `"area"`, `"in modal"`, `"c1"`, `"kind":"status_bar"`, `"kind":"progress"`, `"title":"bx"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("widgets lacks %s", want)
		}
	}
	if strings.Contains(doc, "hidden") {
		t.Errorf("widgets leaks a masked value: %s", doc)
	}
}

// drawn is a custom widget that draws itself.
type drawn struct{}

func (drawn) Kind() string              { return "gauge" }
func (drawn) WidgetID() string          { return "g" }
func (drawn) Render(width int) []string { return []string{strings.Repeat("#", width+5)} }

type opaque struct{}

func (opaque) Kind() string     { return "blob" }
func (opaque) WidgetID() string { return "" }

func TestScreenshotCustomWidgets(t *testing.T) {
	got := Screenshot(Column{Items: []Node{drawn{}, opaque{}}}, 6, 2)
	if got != "######\n<blob>" {
		t.Errorf("got %q", got)
	}
}

type ptrApp struct{ miniCounter }

type ptrModel struct{ N int }

func (ptrApp) Init() (Model, error) { return &ptrModel{}, nil }

type decoderApp struct{ miniCounter }

func (decoderApp) DecodeModel(json.RawMessage) (Model, error) { return 42, nil }

func TestDecodeModel(t *testing.T) {
	m, err := decodeModel(ptrApp{}, json.RawMessage(`{"N":7}`))
	if err != nil || m.(*ptrModel).N != 7 {
		t.Errorf("pointer model: %v %v", m, err)
	}
	if m, err := decodeModel(miniCounter{}, json.RawMessage(`5`)); err != nil || m.(int) != 5 {
		t.Errorf("value model: %v %v", m, err)
	}
	if m, _ := decodeModel(decoderApp{}, nil); m != 42 {
		t.Errorf("ModelDecoder not used: %v", m)
	}
	if _, err := decodeModel(miniCounter{}, json.RawMessage(`"x"`)); err == nil {
		t.Error("a string decoded into an int model")
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{ToolsChanged: "tools_changed", ResourceChanged: "resource_changed",
		Started: "started", Stopped: "stopped", EventKind(99): "unknown"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
	}
}

// loop is a container that contains itself.
type loop struct{}

func (loop) Kind() string     { return "loop" }
func (loop) WidgetID() string { return "l" }
func (loop) Children() []Node { return []Node{loop{}, Button{ID: "b", OnClick: 1}} }

func TestSelfContainingViewIsCutOff(t *testing.T) {
	d := Derive("s", loop{})
	if len(d.Tools) != 1 || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0].Reason, "deeper than") {
		t.Errorf("derive: %v / %v", names(d.Tools), d.Warnings)
	}
	if _, err := Locate(loop{}, Tool{Widget: "zz", Kind: "button", Action: "click"}); !errors.Is(err, ErrWidget) {
		t.Errorf("locate: %v", err)
	}
	if _, err := json.Marshal(WidgetTree(loop{})); err != nil {
		t.Error(err)
	}
	_ = Screenshot(loop{}, 10, 3)
}
