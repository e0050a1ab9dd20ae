package session

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// drawView draws a view of built-in widgets (and sometimes a custom one)
// from a small palette of ids, so consecutive draws often share a shape.
func drawView(t *rapid.T, label string, depth int) Node {
	id := rapid.SampledFrom([]string{"a", "b", "c", "a", "bad id", ""}).Draw(t, label+" id")
	switch rapid.IntRange(0, 9).Draw(t, label+" kind") {
	case 0, 1:
		return Button{ID: id, Label: rapid.SampledFrom([]string{"x", "y"}).Draw(t, label+" label"), OnClick: 1,
			Disabled: rapid.Bool().Draw(t, label+" disabled"), Exclude: rapid.IntRange(0, 5).Draw(t, label+" excl") == 0}
	case 2:
		var mask rune
		if rapid.Bool().Draw(t, label+" masked") {
			mask = '*'
		}
		return TextInput{ID: id, Value: "v", Mask: mask}
	case 3:
		return Checkbox{ID: id, Checked: rapid.Bool().Draw(t, label+" checked")}
	case 4:
		return Text{ID: id, Text: "t"}
	case 5:
		return oddNode{id: id, kind: "custom", action: rapid.SampledFrom([]string{"go", "stop"}).Draw(t, label+" action")}
	case 6:
		return SelectList{ID: id, Options: []string{"o", "p"}}
	default:
		if depth > 3 {
			return nil
		}
		n := rapid.IntRange(0, 4).Draw(t, label+" n")
		items := make([]Node, n)
		for i := range items {
			items[i] = drawView(t, label+" >", depth+1)
		}
		if rapid.Bool().Draw(t, label+" row") {
			return Row{Items: items}
		}
		return Column{Items: items}
	}
}

// restyle copies view, drawing anew what its widgets show (labels, check
// marks, texts, and sometimes a button's disabled flag).
func restyle(t *rapid.T, view Node) Node {
	switch n := view.(type) {
	case Button:
		n.Label = rapid.SampledFrom([]string{"x", "y", "z"}).Draw(t, "restyled label")
		if rapid.IntRange(0, 4).Draw(t, "flip disabled") == 0 {
			n.Disabled = !n.Disabled
		}
		return n
	case Checkbox:
		n.Checked = rapid.Bool().Draw(t, "restyled check")
		return n
	case Text:
		n.Text = rapid.SampledFrom([]string{"t", "u"}).Draw(t, "restyled text")
		return n
	case Row:
		items := make([]Node, len(n.Items))
		for i, it := range n.Items {
			items[i] = restyle(t, it)
		}
		return Row{Items: items}
	case Column:
		items := make([]Node, len(n.Items))
		for i, it := range n.Items {
			items[i] = restyle(t, it)
		}
		return Column{Items: items}
	}
	return view
}

// Rederive answers exactly what Derive answers, whatever the previous
// view was: the same derivation when the shape held (and then the very
// same tools), a fresh one otherwise.
func TestPropRederiveAnswersAsDerive(t *testing.T) {
	kept := 0
	rapid.Check(t, func(t *rapid.T) {
		session := rapid.SampledFrom([]string{"s", "s2"}).Draw(t, "session")
		prevView := drawView(t, "prev", 0)
		prev := Derive(session, prevView)
		view := restyle(t, prevView) // what a widget shows changes, its tools often not
		if rapid.Bool().Draw(t, "another view") {
			view = drawView(t, "view", 0)
		}
		got, want := Rederive(session, view, prev), Derive(session, view)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Rederive %+v\nDerive   %+v", got, want)
		}
		if len(got.Tools) > 0 && len(prev.Tools) > 0 && &got.Tools[0] == &prev.Tools[0] {
			kept++
		}
	})
	if kept == 0 {
		t.Error("no draw kept its previous derivation: the property covers only the fresh path")
	}
	t.Logf("%d draws kept their previous derivation", kept)
}

// A counter click changes what the widgets show, not their tools: the
// previous derivation is returned as it is.
func TestRederiveKeepsTheDerivationOfAnUnchangedShape(t *testing.T) {
	prev := Derive("c", counterView(1))
	got := Rederive("c", counterView(2), prev)
	if len(got.Tools) == 0 || &got.Tools[0] != &prev.Tools[0] {
		t.Errorf("derived afresh: %v", names(got.Tools))
	}
	// Reset is disabled at zero: one tool fewer, derived afresh.
	if got := Rederive("c", counterView(0), prev); len(got.Tools) != len(prev.Tools)-1 {
		t.Errorf("at zero: %v", names(got.Tools))
	}
}

// BenchmarkRederiveCounter derives the counter's tools after a click:
// Derive (the old path, as baseline) against Rederive from the previous
// render's derivation.
func BenchmarkRederiveCounter(b *testing.B) {
	prev := Derive("c", counterView(1))
	view := counterView(2)
	b.Run("Derive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Derive("c", view)
		}
	})
	b.Run("Rederive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Rederive("c", view, prev)
		}
	})
}
