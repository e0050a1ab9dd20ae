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

// changesBefore is changes as it was while the context resource was
// rendered on every update and patches computed eagerly: it compared every
// resource, context included, byte for byte.
func changesBefore(info Info, old, cur map[string]json.RawMessage, toolsChanged, listened bool) []Event {
	var evs []Event
	if toolsChanged {
		evs = append(evs, Event{Kind: ToolsChanged, Session: info.ID, Principal: info.Principal})
	}
	if old == nil || !listened {
		return evs
	}
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		prev, ok := old[name]
		now := cur[name]
		if ok && string(prev) == string(now) {
			continue
		}
		if !ok {
			prev = []byte("null")
		}
		ev := Event{Kind: ResourceChanged, Session: info.ID, Principal: info.Principal, Resource: name}
		if strings.HasPrefix(name, "model/") {
			ev.Patch = lazyPatch(prev, now)
		}
		evs = append(evs, ev)
	}
	return evs
}

// Deciding whether the context resource changed from its parts lists the
// same events, with the same patches, as rendering it and comparing bytes.
func TestPropChangesAnswerAsBefore(t *testing.T) {
	doc := rapid.SampledFrom([]json.RawMessage{json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`), json.RawMessage(`[1,{"a":null}]`), json.RawMessage(`"x"`)})
	names := rapid.SampledFrom([]string{"s.discover_tools", "s.a.click", "s.b.click", "s.c.type_into"})
	rapid.Check(t, func(t *rapid.T) {
		info := Info{ID: "s", Principal: "p"}
		sess := sessionDoc(info)
		keys := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"model/a", "model/b", "model/c"}), 0, 3, rapid.ID[string]).Draw(t, "keys")
		render := func(label string) (map[string]json.RawMessage, []Tool) {
			res := map[string]json.RawMessage{ResourceWidgets: doc.Draw(t, label+" widgets")}
			for _, k := range keys {
				res[k] = doc.Draw(t, label+" "+k)
			}
			var tools []Tool
			for _, n := range rapid.SliceOfN(names, 0, 4).Draw(t, label+" tools") {
				tools = append(tools, Tool{Name: n})
			}
			return res, tools
		}
		old, oldTools := render("old")
		if rapid.Bool().Draw(t, "first render") {
			old = nil
		}
		cur, curTools := render("cur")
		toolsChanged, listened := rapid.Bool().Draw(t, "tools changed"), rapid.Bool().Draw(t, "listened")
		withContext := func(res map[string]json.RawMessage, tools []Tool) map[string]json.RawMessage {
			if res == nil {
				return nil
			}
			out := maps.Clone(res)
			out[ResourceContext] = contextDoc(sess, res, res[ResourceWidgets], tools)
			return out
		}
		want := changesBefore(info, withContext(old, oldTools), withContext(cur, curTools), toolsChanged, listened)
		got := changes(info, old, cur, oldTools, curTools, toolsChanged, listened)
		if len(got) != len(want) {
			t.Fatalf("%d events, before %d: %+v / %+v", len(got), len(want), got, want)
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Kind != w.Kind || g.Resource != w.Resource || g.Session != w.Session || g.Principal != w.Principal || (g.Patch == nil) != (w.Patch == nil) {
				t.Fatalf("event %d: %+v, before %+v", i, g, w)
			}
			if g.Patch != nil && string(g.Patch()) != string(w.Patch()) {
				t.Fatalf("event %d patch %s, before %s", i, g.Patch(), w.Patch())
			}
		}
	})
}
