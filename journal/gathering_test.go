package journal

import "testing"

// A lone writer's rounds hold one write: they never wait.
func TestGatheringNeverHoldsALoneWriter(t *testing.T) {
	var g gathering
	for range 10 {
		if w := g.want(1); w != 0 {
			t.Fatalf("a lone writer's round waits for %d writes", w)
		}
		g.committed(1, false)
	}
}

// After a round of several writes the next round probes for one more;
// once it has them it commits at once.
func TestGatheringProbesForOneWriterMore(t *testing.T) {
	var g gathering
	g.committed(3, false)
	if w := g.want(1); w != 4 {
		t.Fatalf("after a round of 3 the next waits for %d, want 4", w)
	}
	if w := g.want(4); w != 0 {
		t.Fatalf("a round holding the 4 it waited for still waits for %d", w)
	}
	g.committed(4, false)
	if w := g.want(1); w != 5 {
		t.Fatalf("after a probe that found its writer the next waits for %d, want 5", w)
	}
}

// A fixed set of writers: once a probe finds no writer more, rounds wait
// only for the writers the last round held, so they never run into the
// timer, until reprobeEvery rounds later one probes again.
func TestGatheringASteadySetOfWritersWaitsOnlyForItself(t *testing.T) {
	const writers = 4
	var g gathering
	g.committed(writers, false)
	if w := g.want(1); w != writers+1 {
		t.Fatalf("the first round after %d writes waits for %d, want a probe for %d", writers, w, writers+1)
	}
	g.committed(writers, true) // the probe's timer ran out
	for i := range reprobeEvery - 1 {
		if w := g.want(1); w != writers {
			t.Fatalf("calm round %d waits for %d, want the %d writers the last round held", i, w, writers)
		}
		if w := g.want(writers); w != 0 {
			t.Fatalf("calm round %d holding its %d writers still waits for %d", i, writers, w)
		}
		g.committed(writers, false)
	}
	if w := g.want(1); w != writers {
		t.Fatalf("last calm round waits for %d, want %d", w, writers)
	}
	g.committed(writers, false)
	if w := g.want(1); w != writers+1 {
		t.Fatalf("after %d calm rounds the next waits for %d, want a probe for %d", reprobeEvery, w, writers+1)
	}
}

// A calm round that holds more writes than the last one (writers arrived
// without being waited for) starts probing again.
func TestGatheringProbesAgainWhenRoundsGrow(t *testing.T) {
	var g gathering
	g.committed(4, false)
	g.committed(4, true)
	g.committed(6, false)
	if w := g.want(1); w != 7 {
		t.Fatalf("after a calm round grew to 6 the next waits for %d, want a probe for 7", w)
	}
}

// Writers that leave: a calm round whose writers do not all come commits
// what it has, and the next rounds wait only for that many.
func TestGatheringFollowsWritersThatLeave(t *testing.T) {
	var g gathering
	g.committed(4, false)
	g.committed(4, true)
	g.committed(2, true) // waited for 4, two came
	if w := g.want(1); w != 2 {
		t.Fatalf("after a round of 2 the next waits for %d, want 2", w)
	}
	g.committed(1, true)
	if w := g.want(1); w != 0 {
		t.Fatalf("after a round of 1 the next waits for %d, want none", w)
	}
}
