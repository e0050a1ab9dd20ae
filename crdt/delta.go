package crdt

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Put is the write of Key = Value by the delta's origin; Seq is the dot's
// sequence number within that origin.
type Put struct {
	Key   string
	Value []byte
	Seq   uint64
}

// Removal is the removal of Key by the delta's origin; Seq is the sequence
// number of the dot being removed, not of the removal itself.
type Removal struct {
	Key string
	Seq uint64
}

// Delta is the change of one origin's partition over the sequence range
// (From, To]: for every key written in that range, its last write (a put or
// a removal). Values may alias a Map's storage and must not be modified.
type Delta struct {
	Origin  Origin
	From    uint64
	To      uint64
	Puts    []Put
	Removes []Removal
}

// IsEmpty reports whether d carries nothing: no entries and no advance of
// the origin's sequence.
func (d Delta) IsEmpty() bool {
	return d.From == d.To && len(d.Puts) == 0 && len(d.Removes) == 0
}

func (d Delta) isZero() bool { return d.Origin.IsZero() && d.IsEmpty() && d.From == 0 }

// limits bounds keys and values during validation.
type limits struct {
	maxKey   int
	maxValue int
}

var noLimits = limits{maxKey: math.MaxInt, maxValue: math.MaxInt}

func checkKey(key string, l limits) error {
	if key == "" || len(key) > l.maxKey || !utf8.ValidString(key) {
		return fmt.Errorf("checking key %.64q: must be 1 to %d bytes of UTF-8: %w", key, l.maxKey, ErrInvalidKey)
	}
	return nil
}

func checkValue(key string, value []byte, l limits) error {
	if len(value) > l.maxValue {
		return fmt.Errorf("checking value of %.64q: %d bytes exceed %d: %w", key, len(value), l.maxValue, ErrValueTooLarge)
	}
	return nil
}

// validate checks everything an honest origin guarantees about a delta: a
// valid origin, From <= To, every put's dot inside (From, To] and distinct,
// every removed dot in [1, To], each key at most once, keys and values within
// l.
func (d Delta) validate(l limits) error {
	if err := checkOrigin(d.Origin); err != nil {
		return fmt.Errorf("validating delta: %w", err)
	}
	if d.From > d.To {
		return fmt.Errorf("validating delta of %s: from %d > to %d: %w", d.Origin, d.From, d.To, ErrMalformedDelta)
	}
	if uint64(len(d.Puts)) > d.To-d.From {
		return fmt.Errorf("validating delta of %s: %d puts in a range of %d: %w", d.Origin, len(d.Puts), d.To-d.From, ErrMalformedDelta)
	}
	var dups dupCheck
	dups.init(len(d.Puts) + len(d.Removes))
	var seqBuf [dupScanMax]uint64
	seqs := seqBuf[:0]
	for _, p := range d.Puts {
		if err := checkKey(p.Key, l); err != nil {
			return fmt.Errorf("validating delta of %s: %w", d.Origin, err)
		}
		if err := checkValue(p.Key, p.Value, l); err != nil {
			return fmt.Errorf("validating delta of %s: %w", d.Origin, err)
		}
		if p.Seq <= d.From || p.Seq > d.To {
			return fmt.Errorf("validating delta of %s: put %.64q at %d outside (%d, %d]: %w", d.Origin, p.Key, p.Seq, d.From, d.To, ErrMalformedDelta)
		}
		if dups.seen(p.Key) {
			return fmt.Errorf("validating delta of %s: key %.64q twice: %w", d.Origin, p.Key, ErrMalformedDelta)
		}
		seqs = append(seqs, p.Seq)
	}
	for _, r := range d.Removes {
		if err := checkKey(r.Key, l); err != nil {
			return fmt.Errorf("validating delta of %s: %w", d.Origin, err)
		}
		if r.Seq == 0 || r.Seq > d.To {
			return fmt.Errorf("validating delta of %s: removal of %.64q at %d outside [1, %d]: %w", d.Origin, r.Key, r.Seq, d.To, ErrMalformedDelta)
		}
		if dups.seen(r.Key) {
			return fmt.Errorf("validating delta of %s: key %.64q twice: %w", d.Origin, r.Key, ErrMalformedDelta)
		}
	}
	slices.Sort(seqs)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] == seqs[i-1] {
			return fmt.Errorf("validating delta of %s: two puts at %d: %w", d.Origin, seqs[i], ErrMalformedDelta)
		}
	}
	return nil
}

// ValidateDelta checks d as Apply does before it changes anything: a valid
// origin, From <= To, every put's dot inside (From, To] and distinct, every
// removed dot in [1, To], each key at most once, keys (1 to MaxKeyLen bytes
// of UTF-8) and values (up to MaxValueLen bytes) within cfg's bounds, zero
// fields taking their defaults. It cannot know which origin a map is.
func ValidateDelta(d Delta, cfg Config) error {
	cfg = cfg.withDefaults()
	return d.validate(limits{maxKey: cfg.MaxKeyLen, maxValue: cfg.MaxValueLen})
}

// dupCheck finds repeated keys: by scanning for a few, with a set for more.
type dupCheck struct {
	few [dupScanMax]string
	n   int
	set map[string]struct{}
}

const dupScanMax = 8

func (c *dupCheck) init(n int) {
	if n > dupScanMax {
		c.set = make(map[string]struct{}, n)
	}
}

// seen records key and reports whether it was recorded before.
func (c *dupCheck) seen(key string) bool {
	if c.set == nil {
		if slices.Contains(c.few[:c.n], key) {
			return true
		}
		c.few[c.n] = key
		c.n++
		return false
	}
	if _, ok := c.set[key]; ok {
		return true
	}
	c.set[key] = struct{}{}
	return false
}

// MergeDeltas joins two deltas of the same origin whose ranges touch or
// overlap (b.From <= a.To and a.From <= b.To) into one covering
// (min(a.From, b.From), max(a.To, b.To)]. For a key in both, the later write
// wins: a removal of dot r is later than a put at s exactly when r >= s.
// The zero Delta is an identity. The result lists puts and removals sorted
// by key and is the same whatever the order of a and b.
func MergeDeltas(a, b Delta) (Delta, error) {
	return MergeAll([]Delta{a, b})
}

// MergeAll joins a sequence of deltas of one origin, each touching or
// overlapping the union of those before it, as repeated MergeDeltas would,
// in time linear in their total size. Zero Deltas are skipped.
func MergeAll(ds []Delta) (Delta, error) {
	var acc []Delta
	var from, to uint64
	for i, d := range ds {
		if d.isZero() {
			continue
		}
		if err := d.validate(noLimits); err != nil {
			return Delta{}, fmt.Errorf("merging delta %d: %w", i, err)
		}
		if len(acc) > 0 {
			if d.Origin != acc[0].Origin {
				return Delta{}, fmt.Errorf("merging delta %d: origin %s differs from %s: %w", i, d.Origin, acc[0].Origin, ErrNotMergeable)
			}
			if d.From > to || from > d.To {
				return Delta{}, fmt.Errorf("merging delta %d: range (%d, %d] does not touch (%d, %d]: %w", i, d.From, d.To, from, to, ErrNotMergeable)
			}
			from, to = min(from, d.From), max(to, d.To)
		} else {
			from, to = d.From, d.To
		}
		acc = append(acc, d)
	}
	if len(acc) == 0 {
		return Delta{}, nil
	}
	return mergeValid(acc), nil
}

// op is a key's last write inside a merge.
type op struct {
	put   bool
	seq   uint64
	value []byte
}

// later reports whether o supersedes p. A put at s and a removal of dot r
// of the same key are ordered by (seq, removal): the removal is later iff
// r >= s, since it removed the dot that was current when it ran.
func (o op) later(p op) bool {
	if o.seq != p.seq {
		return o.seq > p.seq
	}
	return !o.put && p.put
}

// mergeValid merges deltas already known to be valid, of one origin, with
// touching ranges.
func mergeValid(ds []Delta) Delta {
	if len(ds) == 1 {
		return canonical(ds[0])
	}
	n := 0
	for _, d := range ds {
		n += len(d.Puts) + len(d.Removes)
	}
	last := make(map[string]op, n)
	out := Delta{Origin: ds[0].Origin, From: ds[0].From, To: ds[0].To}
	for _, d := range ds {
		out.From, out.To = min(out.From, d.From), max(out.To, d.To)
		for _, p := range d.Puts {
			o := op{put: true, seq: p.Seq, value: p.Value}
			if cur, ok := last[p.Key]; !ok || o.later(cur) {
				last[p.Key] = o
			}
		}
		for _, r := range d.Removes {
			o := op{seq: r.Seq}
			if cur, ok := last[r.Key]; !ok || o.later(cur) {
				last[r.Key] = o
			}
		}
	}
	for k, o := range last {
		if o.put {
			out.Puts = append(out.Puts, Put{Key: k, Value: o.value, Seq: o.seq})
		} else {
			out.Removes = append(out.Removes, Removal{Key: k, Seq: o.seq})
		}
	}
	sortDelta(&out)
	return out
}

// canonical returns d with its entries sorted by key, copying the slices.
func canonical(d Delta) Delta {
	d.Puts = slices.Clone(d.Puts)
	d.Removes = slices.Clone(d.Removes)
	sortDelta(&d)
	return d
}

func sortDelta(d *Delta) {
	slices.SortFunc(d.Puts, func(a, b Put) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(d.Removes, func(a, b Removal) int { return strings.Compare(a.Key, b.Key) })
}
