package session

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// custom is an app-defined ToolProvider with arbitrary actions.
type custom struct {
	id   string
	acts []Action
}

func (c custom) Kind() string      { return "custom" }
func (c custom) WidgetID() string  { return c.id }
func (c custom) Actions() []Action { return c.acts }
func (c custom) Perform(a string, _ map[string]any) (Outcome, error) {
	return Outcome{Msg: a}, nil
}

func names(ts []Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestDeriveNamesAndAnnotations(t *testing.T) {
	view := Column{Items: []Node{
		Text{Text: "hello"},
		Button{ID: "go", Label: "Go", OnClick: "go"},
		Row{Items: []Node{Checkbox{ID: "agree"}, Button{ID: "off", Disabled: true}, Button{ID: "hidden", Exclude: true, OnClick: 1}}},
		Modal{ID: "dlg", Exclude: true, Content: []Node{Button{ID: "inner", OnClick: 1}}},
	}}
	d := Derive("demo", view)
	want := []string{"demo.go.click", "demo.agree.toggle", "demo.agree.get_checked", "demo.inner.click"}
	if got := names(d.Tools); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	click, read := d.Tools[0], d.Tools[2]
	if !click.Sensitive || click.ReadOnly || click.Destructive || click.Kind != "button" {
		t.Errorf("click annotations: %+v", click)
	}
	if read.Sensitive || !read.ReadOnly {
		t.Errorf("get_checked annotations: %+v", read)
	}
	if len(d.Warnings) != 0 {
		t.Errorf("warnings: %v", d.Warnings)
	}
}

func TestDeriveRefusals(t *testing.T) {
	deep := map[string]any{"type": "object"}
	cur := deep
	for range MaxSchemaDepth {
		next := map[string]any{}
		cur["x"] = next
		cur = next
	}
	okDeep := map[string]any{"type": "object"}
	cur = okDeep
	for range MaxSchemaDepth - 1 {
		next := map[string]any{}
		cur["x"] = next
		cur = next
	}
	big := make([]any, MaxSchemaValues)
	for i := range big {
		big[i] = i
	}
	tests := []struct {
		name   string
		node   Node
		tools  int
		reason string
	}{
		{"dotted widget id", Button{ID: "a.b", OnClick: 1}, 0, "widget id"},
		{"empty widget id", Button{OnClick: 1}, 0, "widget id"},
		{"long widget id", Button{ID: strings.Repeat("w", 33), OnClick: 1}, 0, "widget id"},
		{"control char id", Button{ID: "a\nb", OnClick: 1}, 0, "widget id"},
		{"bad action name", custom{"c", []Action{{Name: "Do-It"}}}, 0, "action name"},
		{"too deep", custom{"c", []Action{{Name: "a", Schema: deep}}}, 0, "deeper"},
		{"deep but within", custom{"c", []Action{{Name: "a", Schema: okDeep}}}, 1, ""},
		{"too many values", custom{"c", []Action{{Name: "a", Schema: map[string]any{"type": "object", "enum": big}}}}, 0, "more than"},
		{"keys equal once cleaned", custom{"c", []Action{{Name: "a", Schema: map[string]any{"type": "object",
			"properties": map[string]any{"amount": map[string]any{}, "amo\u200bunt": map[string]any{}}}}}}, 0, "two keys"},
		{"unencodable value", custom{"c", []Action{{Name: "a", Schema: map[string]any{"type": "object", "x": make(chan int)}}}}, 0, "JSON cannot encode"},
		{"not an object schema", custom{"c", []Action{{Name: "a", Schema: map[string]any{"type": "string"}}}}, 0, "type"},
		{"one good one bad", custom{"c", []Action{{Name: "ok"}, {Name: "BAD"}}}, 1, "action name"},
	}
	for _, tt := range tests {
		d := Derive("s", tt.node)
		if len(d.Tools) != tt.tools {
			t.Errorf("%s: %d tools, want %d", tt.name, len(d.Tools), tt.tools)
		}
		if tt.reason == "" {
			if len(d.Warnings) != 0 {
				t.Errorf("%s: unexpected warnings %v", tt.name, d.Warnings)
			}
			continue
		}
		if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0].Reason, tt.reason) {
			t.Errorf("%s: warnings %v, want one about %q", tt.name, d.Warnings, tt.reason)
		}
	}
	if d := Derive("bad.session", Button{ID: "b", OnClick: 1}); len(d.Tools) != 0 || len(d.Warnings) != 1 {
		t.Errorf("invalid session id derived %v / %v", d.Tools, d.Warnings)
	}
}

func TestDeriveSanitisesSchemaAndDescription(t *testing.T) {
	p := custom{"c", []Action{{Name: "a", Description: "do\u202e it\u200b", Schema: map[string]any{
		"type":       "object",
		"title":      "ti\u2066tle",
		"properties": map[string]any{"na\ufeffme": map[string]any{"type": "string", "enum": []any{"x\u2028y", 1.5, true, nil}}},
	}}}}
	d := Derive("s", p)
	if len(d.Tools) != 1 {
		t.Fatalf("tools %v warnings %v", d.Tools, d.Warnings)
	}
	tool := d.Tools[0]
	if tool.Description != "do it" {
		t.Errorf("description %q", tool.Description)
	}
	want := `{"properties":{"name":{"enum":["xy",1.5,true,null],"type":"string"}},"title":"title","type":"object"}`
	if string(tool.InputSchema) != want {
		t.Errorf("schema %s\nwant   %s", tool.InputSchema, want)
	}
}

// genLeaf draws an interactive or static widget with an id from a small
// pool, so duplicates and invalid ids occur.
func genLeaf(ids []string) *rapid.Generator[Node] {
	return rapid.Custom(func(t *rapid.T) Node {
		id := rapid.SampledFrom(ids).Draw(t, "id")
		dis := rapid.Float64Range(0, 1).Draw(t, "p") < 0.1
		switch rapid.IntRange(0, 17).Draw(t, "kind") {
		case 0:
			return Button{ID: id, OnClick: id, Disabled: dis}
		case 1:
			return TextInput{ID: id, Disabled: dis, Mask: rapid.SampledFrom([]rune{0, '*'}).Draw(t, "mask")}
		case 2:
			return PasswordField{ID: id, Disabled: dis}
		case 3:
			return TextArea{ID: id, Disabled: dis}
		case 4:
			return SelectList{ID: id, Options: []string{"a"}, Disabled: dis}
		case 5:
			return Checkbox{ID: id, Disabled: dis}
		case 6:
			return Tabs{ID: id, Tabs: []string{"a"}, Disabled: dis}
		case 7:
			return Menu{ID: id, Disabled: dis}
		case 8:
			return Table{ID: id, Disabled: dis}
		case 9:
			return Tree{ID: id, Disabled: dis}
		case 10:
			return Scrubber{ID: id, Disabled: dis}
		case 11:
			return Chart{ID: id, Exclude: dis}
		case 12:
			return Text{ID: id, Text: "t"}
		case 13:
			return Progress{ID: id}
		case 14:
			return StatusBar{ID: id}
		case 15:
			return Button{ID: id, OnClick: 1, Exclude: true}
		case 16:
			return custom{id, []Action{{Name: rapid.SampledFrom([]string{"poke", "Bad", "get_x"}).Draw(t, "act"), Write: true}}}
		default:
			return nil
		}
	})
}

// genTree draws a view tree of containers (some of which offer tools) and leaves.
func genTree(ids []string, depth int) *rapid.Generator[Node] {
	return rapid.Custom(func(t *rapid.T) Node {
		if depth == 0 || rapid.Float64Range(0, 1).Draw(t, "leaf") < 0.4 {
			return genLeaf(ids).Draw(t, "node")
		}
		kids := rapid.SliceOfN(genTree(ids, depth-1), 0, 4).Draw(t, "kids")
		switch rapid.IntRange(0, 4).Draw(t, "container") {
		case 0:
			return Column{Items: kids}
		case 1:
			return Row{Items: kids}
		case 2:
			return Box{Title: "b", Items: kids}
		case 3:
			return Modal{ID: rapid.SampledFrom(ids).Draw(t, "mid"), Content: kids}
		default:
			return Viewport{ID: rapid.SampledFrom(ids).Draw(t, "vid"), Content: kids}
		}
	})
}

var idPool = []string{"a", "b", "c", "d", "e", "f", "x-1", "y_2", "bad.id", ""}

func equalTools(a, b []Tool) bool {
	return slices.EqualFunc(a, b, func(x, y Tool) bool { return x.Equal(y) })
}

func TestPropDeriveCommutesWithComposition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(genTree(idPool, 3), 0, 5).Draw(t, "parts")
		whole := Derive("s", Column{Items: parts}).Tools
		var merged []Tool
		for _, p := range parts {
			merged = Merge(merged, Derive("s", p).Tools)
		}
		if !equalTools(whole, merged) {
			t.Fatalf("derive(compose) %v != merge(derive parts) %v", names(whole), names(merged))
		}
		// A container with tools of its own composes the same way: its own
		// tools first, then its children's.
		id := rapid.SampledFrom(idPool).Draw(t, "modal")
		modal := Derive("s", Modal{ID: id, Content: parts}).Tools
		if want := Merge(Derive("s", Modal{ID: id}).Tools, merged); !equalTools(modal, want) {
			t.Fatalf("derive(modal) %v != merge(modal, parts) %v", names(modal), names(want))
		}
	})
}

func TestPropContainerTransparency(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := genTree(idPool, 3).Draw(t, "n")
		want := Derive("s", n).Tools
		for _, wrapped := range []Node{Column{Items: []Node{n}}, Row{Items: []Node{n}}, Box{Title: "t", Items: []Node{n}},
			Column{Items: []Node{Text{Text: "x"}, Row{Items: []Node{n}}, nil}}} {
			if got := Derive("s", wrapped).Tools; !equalTools(got, want) {
				t.Fatalf("%T changes derivation: %v vs %v", wrapped, names(got), names(want))
			}
		}
	})
}

func TestPropOrderInvariance(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(genTree(idPool, 2), 0, 6).Draw(t, "parts")
		perm := rapid.Permutation(parts).Draw(t, "perm")
		a := names(Derive("s", Column{Items: parts}).Tools)
		b := names(Derive("s", Column{Items: perm}).Tools)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("tool names depend on order: %v vs %v", a, b)
		}
	})
	// With unique ids the definitions themselves are order-invariant.
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "n")
		parts := make([]Node, n)
		for i := range parts {
			parts[i] = genLeaf([]string{fmt.Sprintf("w%d", i)}).Draw(t, "leaf")
		}
		perm := rapid.Permutation(parts).Draw(t, "perm")
		sortByName := func(ts []Tool) []Tool {
			slices.SortFunc(ts, func(x, y Tool) int { return strings.Compare(x.Name, y.Name) })
			return ts
		}
		a := sortByName(Derive("s", Column{Items: parts}).Tools)
		b := sortByName(Derive("s", Column{Items: perm}).Tools)
		if !equalTools(a, b) {
			t.Fatalf("definitions depend on order")
		}
	})
}

func TestPropToolCountIsSumOverWidgets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(t, "n")
		parts := make([]Node, n)
		sum := 0
		for i := range parts {
			parts[i] = genLeaf([]string{fmt.Sprintf("w%d", i), "bad.id"}).Draw(t, "leaf")
			sum += len(Derive("s", parts[i]).Tools)
		}
		view := Column{Items: []Node{Row{Items: parts[:n/2]}, Box{Items: parts[n/2:]}}}
		if got := len(Derive("s", view).Tools); got != sum {
			t.Fatalf("%d tools, want sum %d", got, sum)
		}
		for _, p := range parts {
			expect := 0
			if tp, ok := p.(ToolProvider); ok && ValidID(tp.WidgetID()) {
				if ex, ok := p.(Excluder); !ok || !ex.Excluded() {
					for _, a := range tp.Actions() {
						if ValidAction(a.Name) {
							expect++
						}
					}
				}
			}
			if got := len(Derive("s", p).Tools); got != expect {
				t.Fatalf("%T %q: %d tools, want %d", p, p.WidgetID(), got, expect)
			}
		}
	})
}

// genHostile draws arbitrary nested schema values, including types JSON
// cannot encode, hostile strings and deep or wide nesting.
func genHostile(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		k := rapid.IntRange(0, 9).Draw(t, "k")
		if depth <= 0 && k >= 6 {
			k = 0
		}
		switch k {
		case 0:
			return hostileString().Draw(t, "s")
		case 1:
			return rapid.Float64().Draw(t, "f")
		case 2:
			return rapid.Bool().Draw(t, "b")
		case 3:
			return nil
		case 4:
			return rapid.SampledFrom([]any{make(chan int), func() {}, struct{ X int }{1}, []int{1}, complex(1, 2)}).Draw(t, "odd")
		case 5:
			return rapid.Int().Draw(t, "i")
		case 6, 7:
			m := map[string]any{}
			for range rapid.IntRange(0, 4).Draw(t, "n") {
				m[hostileString().Draw(t, "key")] = genHostile(depth-1).Draw(t, "v")
			}
			return m
		default:
			return rapid.SliceOfN(genHostile(depth-1), 0, 4).Draw(t, "list")
		}
	})
}

func TestPropHostileSchemasNeverPanic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		schema := map[string]any{"type": "object"}
		for range rapid.IntRange(0, 4).Draw(t, "n") {
			schema[hostileString().Draw(t, "key")] = genHostile(rapid.IntRange(0, 40).Draw(t, "depth")).Draw(t, "v")
		}
		// Sometimes bury a hostile value under a chain of nested maps or lists
		// around the depth limit.
		if chain := rapid.IntRange(0, MaxSchemaDepth+8).Draw(t, "chain"); chain > 20 {
			var v any = genHostile(2).Draw(t, "buried")
			for i := range chain {
				if i%2 == 0 {
					v = map[string]any{"k": v}
				} else {
					v = []any{v}
				}
			}
			schema["deep"] = v
		}
		p := custom{"c", []Action{{Name: "a", Description: hostileString().Draw(t, "desc"), Schema: schema}}}
		d := Derive("s", p)
		if len(d.Tools)+len(d.Warnings) != 1 {
			t.Fatalf("want one tool or one warning, got %v / %v", d.Tools, d.Warnings)
		}
		for _, tool := range d.Tools {
			checkClean(t, tool.Description)
			var v any
			if err := json.Unmarshal(tool.InputSchema, &v); err != nil {
				t.Fatalf("schema is not JSON: %v", err)
			}
			walkJSON(t, v, 1)
		}
	})
}

func checkClean(t *rapid.T, s string) {
	if Sanitize(s) != s {
		t.Fatalf("unclean string %q", s)
	}
}

func walkJSON(t *rapid.T, v any, depth int) {
	if depth > MaxSchemaDepth+1 {
		t.Fatalf("schema deeper than %d", MaxSchemaDepth)
	}
	switch x := v.(type) {
	case string:
		checkClean(t, x)
	case map[string]any:
		for k, e := range x {
			checkClean(t, k)
			walkJSON(t, e, depth+1)
		}
	case []any:
		for _, e := range x {
			walkJSON(t, e, depth+1)
		}
	}
}

func TestStickySet(t *testing.T) {
	s := newSticky("s", 0)
	a := Derive("s", Button{ID: "b", OnClick: 1}).Tools
	if changed, _ := s.add(a); !changed {
		t.Fatal("first add reported no change")
	}
	if changed, _ := s.add(a); changed {
		t.Fatal("same tools reported a change")
	}
	if changed, _ := s.add(nil); changed {
		t.Fatal("an empty render removed tools")
	}
	if len(s.tools) != 2 || s.tools[0].Name != "s.discover_tools" {
		t.Fatalf("tools %v", names(s.tools))
	}
	mod := a[0]
	mod.Description = "other"
	if changed, _ := s.add([]Tool{mod}); !changed || s.tools[1].Description != "other" {
		t.Fatal("a changed definition was not reported")
	}
	limited := newSticky("s", 2)
	if changed, refused := limited.add(Derive("s", Checkbox{ID: "c"}).Tools); !changed || refused != 1 || len(limited.tools) != 2 {
		t.Fatalf("limit: changed=%v refused=%d tools=%v", changed, refused, names(limited.tools))
	}
}
