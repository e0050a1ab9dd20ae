package swarm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// perOrigin answers as the map of origin to value it replaced, through any
// sequence of sets and deletes.
func TestPerOriginAnswersAsAMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		origins := []crdt.Origin{{Name: "n1", Epoch: 1}, {Name: "n1", Epoch: 2}, {Name: "n2", Epoch: 1}, {Name: "n3", Epoch: 7}}
		var p perOrigin[int]
		m := map[crdt.Origin]int{}
		for range rapid.IntRange(0, 60).Draw(rt, "steps") {
			o := rapid.SampledFrom(origins).Draw(rt, "origin")
			if rapid.Bool().Draw(rt, "set") {
				v := rapid.Int().Draw(rt, "v")
				p, m[o] = p.set(o, v), v
			} else {
				p = p.del(o)
				delete(m, o)
			}
			if len(p) != len(m) {
				rt.Fatalf("%d values, the map %d", len(p), len(m))
			}
			for _, q := range origins {
				got, ok := p.get(q)
				want, wok := m[q]
				if ok != wok || got != want {
					rt.Fatalf("%v: %d %v, the map %d %v", q, got, ok, want, wok)
				}
			}
		}
	})
}

// BenchmarkIndexSessionRecords is the index's memory for 10,000 sessions
// with one record each: "map" is the map per session it replaced,
// "slice" perOrigin.
func BenchmarkIndexSessionRecords(b *testing.B) {
	const n = 10000
	o := crdt.Origin{Name: "node1", Epoch: 1}
	rec := sessionRecord{App: "counter", Principal: "alice", Created: time.Now(), Status: "running", Node: "node1"}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			x := map[string]map[crdt.Origin]sessionRecord{}
			for i := range n {
				id := fmt.Sprintf("s%05d", i)
				x[id] = map[crdt.Origin]sessionRecord{o: rec}
			}
			b.ReportMetric(float64(heap()-before)/n, "B/session")
			runtime.KeepAlive(x)
		}
	})
	b.Run("slice", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			x := map[string]perOrigin[sessionRecord]{}
			for i := range n {
				id := fmt.Sprintf("s%05d", i)
				x[id] = x[id].set(o, rec)
			}
			b.ReportMetric(float64(heap()-before)/n, "B/session")
			runtime.KeepAlive(x)
		}
	})
}
