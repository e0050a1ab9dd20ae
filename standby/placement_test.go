package standby

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func names(n int) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Name: fmt.Sprintf("node%d", i+1)}
	}
	return out
}

func TestPlaceNeverPicksTheOwnerAndReturnsAtMostR(t *testing.T) {
	nodes := names(5)
	for _, r := range []int{0, 1, 2, 4, 9} {
		got := Place("s1", nodes[0], nodes, r)
		if len(got) != min(r, 4) {
			t.Errorf("r=%d: %d standbys %v, want %d", r, len(got), got, min(r, 4))
		}
		if slices.Contains(got, "node1") {
			t.Errorf("r=%d: the owner stands by for itself: %v", r, got)
		}
	}
}

func TestPlaceIsTheSameWhateverTheOrderOfTheCandidates(t *testing.T) {
	nodes := names(8)
	want := Place("demo", nodes[2], nodes, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		if got := Place("demo", Candidate{Name: "node3"}, nodes, 2); !slices.Equal(got, want) {
			t.Fatalf("placement depends on order: %v, want %v", got, want)
		}
	}
}

func TestAJoiningNodeMovesOnlyTheSessionsItTops(t *testing.T) {
	before := names(6)
	after := append(names(6), Candidate{Name: "node7"})
	moved := 0
	for i := range 1000 {
		id := fmt.Sprintf("s%d", i)
		a, b := Place(id, before[0], before, 1), Place(id, after[0], after, 1)
		if a[0] != b[0] {
			if b[0] != "node7" {
				t.Fatalf("session %s moved from %s to %s, not to the joining node", id, a[0], b[0])
			}
			moved++
		}
	}
	// 1/6 of the sessions in expectation (node7 is one of six candidates).
	if moved < 100 || moved > 250 {
		t.Errorf("%d of 1000 sessions moved to the joining node, want about 167", moved)
	}
}

func TestPlaceSpreadsAcrossZonesFirst(t *testing.T) {
	nodes := []Candidate{
		{"a1", "a"}, {"a2", "a"}, {"a3", "a"},
		{"b1", "b"}, {"b2", "b"},
		{"c1", "c"},
	}
	for i := range 200 {
		id := fmt.Sprintf("s%d", i)
		got := Place(id, nodes[0], nodes, 2)
		zones := map[byte]bool{}
		for _, n := range got {
			zones[n[0]] = true
		}
		if zones['a'] || len(zones) != 2 {
			t.Fatalf("session %s owned in zone a stands by on %v: want one node in each of zones b and c", id, got)
		}
	}
	// More standbys than zones: the rest fill in by score.
	if got := Place("x", nodes[0], nodes, 4); len(got) != 4 {
		t.Fatalf("r=4 over 5 candidates gave %v", got)
	}
}

func TestPlaceSpreadsSessionsEvenly(t *testing.T) {
	nodes := names(4)
	count := map[string]int{}
	for i := range 3000 {
		count[Place(fmt.Sprintf("s%d", i), nodes[0], nodes, 1)[0]]++
	}
	for _, n := range []string{"node2", "node3", "node4"} {
		if count[n] < 850 || count[n] > 1150 {
			t.Errorf("%s stands by for %d of 3000 sessions, want about 1000: %v", n, count[n], count)
		}
	}
}
