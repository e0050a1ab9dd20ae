package session

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// This file keeps the context document's assembly as it was before it
// stopped allocating per tool name, so that a property test proves the new
// code answers byte for byte the same and the benchmark measures old against
// new in one run:
//
//	go test -run '^$' -bench ContextDocCounter -count 5 ./session/

// contextDocBefore is contextDoc as it was.
func contextDocBefore(sess json.RawMessage, projected map[string]json.RawMessage, widgets json.RawMessage, tools []Tool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"session":`)
	b.Write(sess)
	b.WriteString(`,"projections":{`)
	for i, k := range slices.Sorted(maps.Keys(projected)) {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(strings.TrimPrefix(k, "model/"))
		b.Write(key)
		b.WriteByte(':')
		b.Write(projected[k])
	}
	b.WriteString(`},"widgets":`)
	if len(widgets) == 0 {
		widgets = json.RawMessage("null")
	}
	b.Write(widgets)
	b.WriteString(`,"tools":[`)
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(t.Name)
		b.Write(name)
	}
	b.WriteString("]}")
	return b.Bytes()
}

func TestPropContextDocAnswersAsBefore(t *testing.T) {
	// Names drawn from every rune class, including what JSON escapes
	// (quotes, backslashes, controls, <, >, &, U+2028) and invalid UTF-8.
	str := rapid.OneOf(
		rapid.StringMatching(`[A-Za-z0-9_.-]{0,40}`),
		rapid.String(),
		rapid.SampledFrom([]string{`a"b`, `a\b`, "a\nb", "<x>&", "\u2028", "\xff\xfe", "é", ""}),
	)
	raw := rapid.SampledFrom([]json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"a":[1,2]}`), json.RawMessage(`null`)})
	rapid.Check(t, func(t *rapid.T) {
		sess := raw.Draw(t, "sess")
		widgets := raw.Draw(t, "widgets")
		projected := map[string]json.RawMessage{}
		for _, k := range rapid.SliceOfN(str, 0, 4).Draw(t, "keys") {
			projected["model/"+k] = raw.Draw(t, "value")
		}
		var tools []Tool
		for _, n := range rapid.SliceOfN(str, 0, 6).Draw(t, "tools") {
			tools = append(tools, Tool{Name: n})
		}
		got, want := contextDoc(sess, projected, widgets, tools), contextDocBefore(sess, projected, widgets, tools)
		if !bytes.Equal(got, want) {
			t.Fatalf("contextDoc differs from before:\n got  %s\n want %s", got, want)
		}
	})
}

// counterView is the counter demo's view (which this package cannot
// import) at count n.
func counterView(n int) Node {
	return Column{Items: []Node{
		Text{ID: "count", Text: "Count: " + strconv.Itoa(n)},
		Row{Items: []Node{Button{ID: "dec", Label: "-", OnClick: "dec"}, Button{ID: "inc", Label: "+", OnClick: "inc"},
			Button{ID: "reset", Label: "Reset", OnClick: "reset", Disabled: n == 0}}},
	}}
}

// BenchmarkContextDocCounter assembles the counter's context resource, as
// every click's commit does: before and after, in one run.
func BenchmarkContextDocCounter(b *testing.B) {
	view := counterView(1)
	tools := append([]Tool{discoverTool("c")}, Derive("c", view).Tools...)
	widgets, err := json.Marshal(WidgetTree(view))
	if err != nil {
		b.Fatal(err)
	}
	sess := sessionDoc(Info{ID: "c", App: "counter", Status: "running"})
	projected := map[string]json.RawMessage{"model/count": json.RawMessage(`{"count":1}`)}
	for _, v := range []struct {
		name string
		doc  func(json.RawMessage, map[string]json.RawMessage, json.RawMessage, []Tool) []byte
	}{{"Before", contextDocBefore}, {"After", contextDoc}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(v.doc(sess, projected, widgets, tools)) == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}
