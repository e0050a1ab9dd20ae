package swarm

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"
)

// A revSet answers every question as the map it replaces would, through
// any sequence of puts, removals and filtered removals, across its
// rebuilds.
func TestRevSetAnswersAsAMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var s revSet[revTime]
		model := map[revKey]int64{}
		// A pool of digests small enough that puts and removals meet
		// the same ones again, large enough to cross rebuilds.
		pool := make([]revKey, 3000)
		for i := range pool {
			pool[i] = revocationOf(fmt.Sprintf("id-%d-%d", seed, i))
		}
		for step := range 20000 {
			k := pool[rng.IntN(len(pool))]
			switch r := rng.IntN(100); {
			case r < 55:
				at := rng.Int64()
				s.put(k, revTimeOf(at))
				model[k] = at
			case r < 95:
				s.remove(k)
				delete(model, k)
			case r < 96:
				cut := rng.Int64()
				s.removeIf(func(_ revKey, v revTime) bool { return v.nanos() < cut })
				maps.DeleteFunc(model, func(_ revKey, at int64) bool { return at < cut })
			default:
				got := map[revKey]int64{}
				for k, v := range s.all() {
					if _, dup := got[k]; dup {
						t.Fatalf("seed %d step %d: all yields %x twice", seed, step, k)
					}
					got[k] = v.nanos()
				}
				if !maps.Equal(got, model) {
					t.Fatalf("seed %d step %d: all yields %d digests, want %d", seed, step, len(got), len(model))
				}
			}
			probe := pool[rng.IntN(len(pool))]
			v, ok := s.get(probe)
			want, wantOK := model[probe]
			if ok != wantOK || (ok && v.nanos() != want) || s.has(probe) != wantOK {
				t.Fatalf("seed %d step %d: get(%x) = %d, %v; want %d, %v", seed, step, probe, v.nanos(), ok, want, wantOK)
			}
			if s.len() != len(model) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, s.len(), len(model))
			}
		}
	}
}

// The maps beside the sorted run stay within an eighth of it (or
// minPending): most digests are packed.
func TestRevSetKeepsMostDigestsPacked(t *testing.T) {
	var s revSet[struct{}]
	for i := range 100000 {
		s.put(revocationOf(fmt.Sprint(i)), struct{}{})
		if i%7 == 0 {
			s.remove(revocationOf(fmt.Sprint(i / 2)))
		}
		if pending := len(s.fresh) + len(s.gone); pending > max(minPending, len(s.run)/8) {
			t.Fatalf("after %d puts: %d pending changes beside a run of %d", i+1, pending, len(s.run))
		}
	}
}

// BenchmarkRevocationMemory reports the live heap per revocation held
// as the node's own (a digest and its time) and as another node's (a
// digest): in a revSet, and in the Go maps it replaced.
func BenchmarkRevocationMemory(b *testing.B) {
	const n = 100000
	keys := make([]revKey, n)
	for i := range keys {
		keys[i] = revocationOf(fmt.Sprintf("s1.%d", i))
	}
	measure := func(fill func() any) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		keep := fill()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	for b.Loop() {
		b.ReportMetric(measure(func() any {
			m := map[revKey]int64{}
			for i, k := range keys {
				m[k] = int64(i)
			}
			return m
		}), "map-own-B/rev")
		b.ReportMetric(measure(func() any {
			var s revSet[revTime]
			for i, k := range keys {
				s.put(k, revTimeOf(int64(i)))
			}
			return &s
		}), "set-own-B/rev")
		b.ReportMetric(measure(func() any {
			m := map[revKey]struct{}{}
			for _, k := range keys {
				m[k] = struct{}{}
			}
			return m
		}), "map-other-B/rev")
		b.ReportMetric(measure(func() any {
			var s revSet[struct{}]
			for _, k := range keys {
				s.put(k, struct{}{})
			}
			return &s
		}), "set-other-B/rev")
		// Serial ids' revocations, kept by Conns itself: blocks of
		// neighbouring serials (all of one node's ids ended).
		b.ReportMetric(measure(func() any { return serialConns(n, 1) }), "blocks-own-B/rev")
		b.ReportMetric(measure(func() any { return serialConns(n, 0) }), "blocks-other-B/rev")
	}
}

// serialConns returns a Conns holding the revocations of serials 0 to
// n-1 of one epoch: every ownEvery-th as its own, the rest as other nodes'
// (ownEvery 1: all its own; 0: none).
func serialConns(n, ownEvery uint32) *Conns {
	c := newConnsState(nil)
	for i := range n {
		k := serialKey(1, i)
		if ownEvery > 0 && i%ownEvery == 0 {
			c.endSerialLocked(k, int64(i))
			continue
		}
		blk, bit := splitSerial(k)
		var added revBits
		added.set(bit)
		c.addElsewhereLocked(blk, &added)
	}
	return c
}

// serialKey is the revocation key of serial seq of epoch.
func serialKey(epoch uint64, seq uint32) revKey {
	var k revKey
	binary.BigEndian.PutUint64(k[:8], epoch)
	binary.BigEndian.PutUint32(k[8:], seq)
	return k
}

// BenchmarkRevocationLookup is the check every request makes of its id
// (Conns.Revoked: the node's own revocations, then the others'), with
// 10,000 and 20,000 of them, a twentieth added since the last rebuild:
// in revSets, and in the Go maps they replaced, in the same run.
func BenchmarkRevocationLookup(b *testing.B) {
	var own revSet[revTime]
	var other revSet[struct{}]
	ownMap, otherMap := map[revKey]int64{}, map[revKey]struct{}{}
	for i := range 30000 {
		k := revocationOf(fmt.Sprintf("s1.%d", i))
		if i%3 == 0 {
			own.put(k, revTimeOf(int64(i)))
			ownMap[k] = int64(i)
		} else {
			other.put(k, struct{}{})
			otherMap[k] = struct{}{}
		}
	}
	live := make([]revKey, 1024) // a live id is in neither: the common case
	for i := range live {
		live[i] = revocationOf(fmt.Sprintf("s1.live.%d", i))
	}
	var sink bool
	b.Run("maps", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := live[i%len(live)]
			_, a := ownMap[k]
			_, o := otherMap[k]
			sink = a || o
			i++
		}
	})
	b.Run("revSets", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := live[i%len(live)]
			sink = own.has(k) || other.has(k)
			i++
		}
	})
	// Serial ids: the same 30,000 revocations in blocks (Conns'
	// endedAtLocked and elsewhereLocked), live ids past them.
	c := serialConns(30000, 3)
	b.Run("blocks", func(b *testing.B) {
		i := uint32(0)
		for b.Loop() {
			k := serialKey(1, 30000+i%1024)
			_, own := c.endedAtLocked(k, true)
			sink = own || c.elsewhereLocked(k, true)
			i++
		}
	})
	_ = sink
}
