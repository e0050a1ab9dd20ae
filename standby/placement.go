package standby

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Candidate is a live node that may stand by for a session.
type Candidate struct {
	// Name is the node's name.
	Name string
	// Zone is the node's failure domain (--zone); empty when unknown.
	Zone string
}

// Place returns, in order of preference, the r nodes that stand by for
// session owned by owner: rendezvous hashing over the candidates other than
// the owner, so that a member joining or leaving moves only the sessions
// whose top choices it changes. Candidates in a zone not yet used (the
// owner's zone counts as used) come before the rest, so the copies spread
// across failure domains when the nodes carry zone labels. The result is
// the same on every node that sees the same candidates, whatever their
// order.
func Place(session string, owner Candidate, candidates []Candidate, r int) []string {
	if r <= 0 {
		return nil
	}
	type scored struct {
		Candidate
		score uint64
	}
	pool := make([]scored, 0, len(candidates))
	for _, c := range candidates {
		if c.Name == owner.Name || slices.ContainsFunc(pool, func(s scored) bool { return s.Name == c.Name }) {
			continue
		}
		pool = append(pool, scored{c, Weight(session, c.Name)})
	}
	slices.SortFunc(pool, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	used := map[string]bool{}
	if owner.Zone != "" {
		used[owner.Zone] = true
	}
	out := make([]string, 0, min(r, len(pool)))
	taken := make([]bool, len(pool))
	// First pass: the best candidate of each zone not yet used; second
	// pass: the best of the rest, zones or not.
	for pass := 0; pass < 2 && len(out) < r; pass++ {
		for i, c := range pool {
			if len(out) == r {
				break
			}
			if taken[i] || (pass == 0 && (c.Zone == "" || used[c.Zone])) {
				continue
			}
			taken[i] = true
			used[c.Zone] = true
			out = append(out, c.Name)
		}
	}
	return out
}

// Weight is node's rendezvous score for key (a session, for placement):
// the nodes of highest score are chosen, so each node's choice of a key
// moves only when that node joins or leaves.
func Weight(key, node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(node))
	// fnv's low bits mix poorly for short keys: finish with a 64-bit mixer.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
