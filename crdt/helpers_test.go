package crdt

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// state is one partition's content as a plain map, for comparisons.
type state map[string]stateEntry

type stateEntry struct {
	Value string
	Seq   uint64
}

// partitionState returns the raw content (hidden or not) the map holds for
// origin o, and its sequence.
func partitionState(m *Map, o Origin) (state, uint64, bool) {
	p := m.exact(o)
	if p == nil {
		return nil, 0, false
	}
	s := state{}
	p.entries.each(func(e tableEntry) { s[string(e.key)] = stateEntry{string(e.value), e.seq} })
	return s, p.seq, true
}

// visibleState returns every visible entry through Range, keyed by
// origin/key.
func visibleState(m *Map) map[string]stateEntry {
	out := map[string]stateEntry{}
	m.Range(func(e Entry) bool {
		out[e.Origin.String()+"/"+e.Key] = stateEntry{string(e.Value), e.Seq}
		return true
	})
	return out
}

// applyOp applies a delta to a plain model, as the owner's history defines.
func (s state) clone() state { return maps.Clone(s) }

func (s state) String() string {
	keys := slices.Sorted(maps.Keys(s))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s@%d ", k, s[k].Value, s[k].Seq)
	}
	return strings.TrimSpace(b.String())
}

// formatDelta renders a delta compactly and canonically.
func formatDelta(d Delta) string {
	d = canonical(d)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d,%d]", d.Origin, d.From, d.To)
	for _, p := range d.Puts {
		fmt.Fprintf(&b, " put %s=%s@%d", p.Key, p.Value, p.Seq)
	}
	for _, r := range d.Removes {
		fmt.Fprintf(&b, " del %s@%d", r.Key, r.Seq)
	}
	return b.String()
}

// history is an owner's sequence of local writes with the owner's state
// after each: states[k] is the partition at seq k.
type history struct {
	origin Origin
	deltas []Delta // deltas[k-1] covers (k-1, k]
	states []state
}

func newHistory(o Origin) *history { return &history{origin: o, states: []state{{}}} }

func (h *history) record(d Delta) {
	next := h.states[len(h.states)-1].clone()
	for _, p := range d.Puts {
		next[p.Key] = stateEntry{string(p.Value), p.Seq}
	}
	for _, r := range d.Removes {
		delete(next, r.Key)
	}
	h.deltas = append(h.deltas, d)
	h.states = append(h.states, next)
}

// segment merges the one-op deltas over (i, j].
func (h *history) segment(i, j int) Delta {
	if i == j {
		return Delta{Origin: h.origin, From: uint64(i), To: uint64(i)}
	}
	d, err := MergeAll(h.deltas[i:j])
	if err != nil {
		panic(err)
	}
	return d
}

func equalStates(a, b state) bool { return maps.Equal(a, b) }
