package apps

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// The counter's and todo's resources encode exactly as the maps they were
// built as before (encoding/json sorts a map's keys).
func TestProjectionsEncodeAsTheirMaps(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := CounterModel{Count: rapid.Int().Draw(rt, "count")}
		td := TodoModel{Filter: rapid.IntRange(0, 8).Draw(rt, "filter")}
		for i := range rapid.IntRange(0, 4).Draw(rt, "items") {
			td.Items = append(td.Items, TodoItem{ID: i, Title: rapid.String().Draw(rt, "title"), Done: rapid.Bool().Draw(rt, "done")})
		}
		if rapid.Bool().Draw(rt, "nil items") {
			td.Items = nil
		}
		for _, tc := range []struct {
			got  any
			want map[string]any
		}{
			{Counter{}.Resources()[0].Project(c), map[string]any{"count": c.Count}},
			{Todo{}.Resources()[0].Project(td), map[string]any{"items": td.Items, "filter": todoFilters()[td.Filter%3]}},
		} {
			got, err := json.Marshal(tc.got)
			if err != nil {
				rt.Fatal(err)
			}
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				rt.Fatalf("encoded %s, the map %s", got, want)
			}
		}
	})
}

// BenchmarkCounterProjection is the counter's resource encoded on every
// render: "map" is what it was, "struct" what it is.
func BenchmarkCounterProjection(b *testing.B) {
	m := CounterModel{Count: 42}
	project := Counter{}.Resources()[0].Project
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(map[string]any{"count": m.Count}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("struct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(project(m)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
