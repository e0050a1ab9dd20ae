package swarm

import (
	"cmp"
	"encoding/binary"
	"iter"
	"slices"
)

// revSet is a set of revocation digests, each with a value of type V,
// packed for memory: every node holds every revocation for the ids'
// maximum age, so this is what a node's memory grows by under connection
// churn. A Go map costs 29 bytes per digest with no value and 54 with an
// int64 (swiss-table slots at their average occupancy, measured in issue
// #13's soak); here a digest costs its 12 bytes and its value, in a slice
// sorted by digest, plus a map of the changes made since the slice was
// last rebuilt, kept to an eighth of it.
//
// Lookups are binary searches (digests are SHA-256 prefixes, so they
// spread evenly and compare within their first bytes). A revSet is not
// safe for concurrent use; Conns guards its sets with its lock.
type revSet[V any] struct {
	run   []revRec[V]         // sorted by digest, each digest once
	fresh map[revKey]V        // added since the last rebuild, not in run
	gone  map[revKey]struct{} // in run, removed since the last rebuild
}

// revRec is one packed record. Its value types have no alignment above
// one byte (revTime, struct{}), so a record is 20 or 12 bytes, not padded.
type revRec[V any] struct {
	k revKey
	v V
}

// revTime is a revocation's time, unix nanoseconds, stored as bytes so a
// record of a digest and a revTime packs into 20 bytes.
type revTime [8]byte

func revTimeOf(at int64) (s revTime) {
	binary.LittleEndian.PutUint64(s[:], uint64(at))
	return s
}

func (s revTime) nanos() int64 { return int64(binary.LittleEndian.Uint64(s[:])) }

// minPending is the number of pending changes below which a set is never
// rebuilt: small sets stay in their map.
const minPending = 256

// keyInts reads a digest as two integers whose order is its bytes' order.
// Every request's check searches by them (Conns.Revoked): through
// bytes.Compare and a closure a check took 550-630 ns with 30,000
// digests, 65-86 this way, beside 53-55 for two Go maps
// (BenchmarkRevocationLookup).
func keyInts(k *revKey) (uint64, uint32) {
	return binary.BigEndian.Uint64(k[:8]), binary.BigEndian.Uint32(k[8:])
}

// compareKeys orders digests as their bytes do.
func compareKeys(a, b *revKey) int {
	ah, al := keyInts(a)
	bh, bl := keyInts(b)
	if ah != bh {
		return cmp.Compare(ah, bh)
	}
	return cmp.Compare(al, bl)
}

// search returns the index of k in run and whether it is there.
func (s *revSet[V]) search(k revKey) (int, bool) {
	hi, lo := keyInts(&k)
	i, j := 0, len(s.run)
	for i < j {
		m := int(uint(i+j) >> 1)
		if h, l := keyInts(&s.run[m].k); h < hi || h == hi && l < lo {
			i = m + 1
		} else {
			j = m
		}
	}
	return i, i < len(s.run) && s.run[i].k == k
}

// get returns k's value.
func (s *revSet[V]) get(k revKey) (V, bool) {
	if v, ok := s.fresh[k]; ok {
		return v, true
	}
	if i, ok := s.search(k); ok {
		if _, removed := s.gone[k]; !removed {
			return s.run[i].v, true
		}
	}
	var zero V
	return zero, false
}

// has reports whether k is in the set.
func (s *revSet[V]) has(k revKey) bool {
	_, ok := s.get(k)
	return ok
}

// put adds k with value v, or replaces its value.
func (s *revSet[V]) put(k revKey, v V) {
	if i, ok := s.search(k); ok {
		s.run[i].v = v
		delete(s.gone, k)
		return
	}
	if s.fresh == nil {
		s.fresh = map[revKey]V{}
	}
	s.fresh[k] = v
	s.settle()
}

// remove takes k out of the set.
func (s *revSet[V]) remove(k revKey) {
	if _, ok := s.fresh[k]; ok {
		delete(s.fresh, k)
		return
	}
	if _, ok := s.search(k); !ok {
		return
	}
	if s.gone == nil {
		s.gone = map[revKey]struct{}{}
	}
	s.gone[k] = struct{}{}
	s.settle()
}

// len returns the number of digests in the set.
func (s *revSet[V]) len() int { return len(s.run) - len(s.gone) + len(s.fresh) }

// all yields every digest and its value, in no set order. The set must
// not change while it runs: to drop entries while reading, use removeIf.
func (s *revSet[V]) all() iter.Seq2[revKey, V] {
	return func(yield func(revKey, V) bool) {
		for _, r := range s.run {
			if _, removed := s.gone[r.k]; removed {
				continue
			}
			if !yield(r.k, r.v) {
				return
			}
		}
		for k, v := range s.fresh {
			if !yield(k, v) {
				return
			}
		}
	}
}

// removeIf takes out every digest for which drop returns true.
func (s *revSet[V]) removeIf(drop func(revKey, V) bool) {
	for k, v := range s.fresh {
		if drop(k, v) {
			delete(s.fresh, k)
		}
	}
	kept := s.run[:0]
	for _, r := range s.run {
		if _, removed := s.gone[r.k]; removed || drop(r.k, r.v) {
			continue
		}
		kept = append(kept, r)
	}
	clear(s.run[len(kept):])
	s.run, s.gone = kept, nil
	if cap(s.run) > 2*len(s.run)+minPending {
		s.run = slices.Clip(slices.Clone(s.run)) // give the emptied part back
	}
}

// settle rebuilds the sorted run once the pending changes exceed an
// eighth of it (and minPending), so the maps stay small beside it and
// each change costs a bounded number of record copies over time.
func (s *revSet[V]) settle() {
	if pending := len(s.fresh) + len(s.gone); pending <= max(minPending, len(s.run)/8) {
		return
	}
	added := make([]revRec[V], 0, len(s.fresh))
	for k, v := range s.fresh {
		added = append(added, revRec[V]{k, v})
	}
	slices.SortFunc(added, func(a, b revRec[V]) int { return compareKeys(&a.k, &b.k) })
	merged := make([]revRec[V], 0, len(s.run)-len(s.gone)+len(added))
	i := 0
	for _, r := range s.run {
		if _, removed := s.gone[r.k]; removed {
			continue
		}
		for i < len(added) && compareKeys(&added[i].k, &r.k) < 0 {
			merged = append(merged, added[i])
			i++
		}
		merged = append(merged, r)
	}
	merged = append(merged, added[i:]...)
	s.run, s.fresh, s.gone = merged, nil, nil
}
