package crdt

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

var (
	originA = Origin{Name: "a", Epoch: 1}
	originB = Origin{Name: "b", Epoch: 1}
)

// genHistory draws a sequence of local writes by one owner over a small key
// pool, so keys are overwritten, removed and re-added often.
func genHistory(t *rapid.T, o Origin, maxOps int) *history {
	m := New(o, Config{})
	h := newHistory(o)
	keys := rapid.SampledFrom([]string{"k0", "k1", "k2", "k3", "k4", "k5"})
	n := rapid.IntRange(0, maxOps).Draw(t, "ops")
	for len(h.deltas) < n {
		k := keys.Draw(t, "key")
		if rapid.IntRange(0, 2).Draw(t, "op") == 0 {
			if d, ok := m.Remove(k); ok {
				h.record(d)
			}
			continue
		}
		d, err := m.Put(k, fmt.Appendf(nil, "v%d", len(h.deltas)+1))
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		h.record(d)
	}
	return h
}

// genSegment draws (i, j] with lo <= i <= hi and i <= j <= n.
func genSegment(t *rapid.T, h *history, lo, hi int, name string) (int, int) {
	n := len(h.deltas)
	i := rapid.IntRange(lo, min(hi, n)).Draw(t, name+".from")
	j := rapid.IntRange(i, n).Draw(t, name+".to")
	return i, j
}

func mustMerge(t *rapid.T, a, b Delta) Delta {
	d, err := MergeDeltas(a, b)
	if err != nil {
		t.Fatalf("merging %s with %s: %v", formatDelta(a), formatDelta(b), err)
	}
	return d
}

// TestMergeLaws checks that MergeDeltas is commutative, associative and
// idempotent on segments of generated histories, and that merging
// adjacent segments equals the segment over their union.
func TestMergeLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t, originA, 30)
		n := len(h.deltas)
		ai, aj := genSegment(t, h, 0, n, "a")
		bi, bj := genSegment(t, h, ai, aj, "b")
		ci, cj := genSegment(t, h, bi, bj, "c")
		a, b, c := h.segment(ai, aj), h.segment(bi, bj), h.segment(ci, cj)

		ab, ba := mustMerge(t, a, b), mustMerge(t, b, a)
		if formatDelta(ab) != formatDelta(ba) {
			t.Fatalf("not commutative:\n a∘b = %s\n b∘a = %s", formatDelta(ab), formatDelta(ba))
		}
		l, r := mustMerge(t, ab, c), mustMerge(t, a, mustMerge(t, b, c))
		if formatDelta(l) != formatDelta(r) {
			t.Fatalf("not associative:\n (a∘b)∘c = %s\n a∘(b∘c) = %s", formatDelta(l), formatDelta(r))
		}
		if aa := mustMerge(t, a, a); formatDelta(aa) != formatDelta(a) {
			t.Fatalf("not idempotent:\n a∘a = %s\n a   = %s", formatDelta(aa), formatDelta(a))
		}
		if want := h.segment(ai, max(aj, bj)); formatDelta(ab) != formatDelta(want) {
			t.Fatalf("a∘b differs from the segment over the union:\n a∘b = %s\n want %s", formatDelta(ab), formatDelta(want))
		}
	})
}

// TestApplyLaws checks Apply as the join of a replica's state with a delta:
// any set of segments, applied in any order and any number of times (gaps
// retried), leaves the replica exactly at the owner's state for the
// furthest contiguous seq it covers; applying merged segments is the same as
// applying them one by one.
func TestApplyLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHistory(t, originA, 30)
		n := len(h.deltas)
		var segs []Delta
		for range rapid.IntRange(1, 6).Draw(t, "segments") {
			i, j := genSegment(t, h, 0, n, "s")
			segs = append(segs, h.segment(i, j))
		}
		replica := New(originB, Config{})
		pending := append([]Delta(nil), segs...)
		for len(pending) > 0 {
			k := rapid.IntRange(0, len(pending)-1).Draw(t, "pick")
			d := pending[k]
			res, err := replica.Apply(d)
			if err != nil {
				t.Fatalf("apply %s: %v", formatDelta(d), err)
			}
			if res.Ignored {
				t.Fatalf("apply %s: ignored", formatDelta(d))
			}
			checkPrefix(t, replica, h)
			if !res.Gap && !rapid.Bool().Draw(t, "duplicate") {
				pending = append(pending[:k], pending[k+1:]...)
			}
			if res.Gap && !anyApplicable(pending, replica.Seq(originA)) {
				break
			}
		}
		reach := reachable(segs)
		if got := replica.Seq(originA); got != reach {
			t.Fatalf("replica at %d, segments reach %d", got, reach)
		}
		// Merging all segments of a chain then applying equals the above.
		if chain := chainFrom0(segs); len(chain) > 0 {
			merged, err := MergeAll(chain)
			if err != nil {
				t.Fatalf("merging chain: %v", err)
			}
			fresh := New(originB, Config{})
			if _, err := fresh.Apply(merged); err != nil {
				t.Fatalf("apply merged: %v", err)
			}
			got, _, _ := partitionState(fresh, originA)
			if want := h.states[merged.To]; !equalStates(got, want) {
				t.Fatalf("merged chain gives %v, want %v", got, want)
			}
		}
	})
}

// checkPrefix asserts the replica's partition of the history's origin is
// exactly the owner's state at the replica's seq: never a mixture, so a
// removed key can never reappear.
func checkPrefix(t interface{ Fatalf(string, ...any) }, m *Map, h *history) {
	got, seq, ok := partitionState(m, h.origin)
	if !ok {
		return
	}
	if want := h.states[seq]; !equalStates(got, want) {
		t.Fatalf("%s holds %s at seq %d: %v, owner had %v", m.Self(), h.origin, seq, got, want)
	}
}

func anyApplicable(ds []Delta, have uint64) bool {
	for _, d := range ds {
		if d.From <= have && d.To > have {
			return true
		}
	}
	return false
}

// reachable is the furthest seq a replica starting at 0 reaches with segs.
func reachable(segs []Delta) uint64 {
	var have uint64
	for changed := true; changed; {
		changed = false
		for _, d := range segs {
			if d.From <= have && d.To > have {
				have, changed = d.To, true
			}
		}
	}
	return have
}

// chainFrom0 orders the segments reachable from 0 into a mergeable chain.
func chainFrom0(segs []Delta) []Delta {
	var chain []Delta
	var have uint64
	used := make([]bool, len(segs))
	for changed := true; changed; {
		changed = false
		for i, d := range segs {
			if !used[i] && d.From <= have {
				used[i], changed = true, true
				chain = append(chain, d)
				have = max(have, d.To)
			}
		}
	}
	return chain
}
