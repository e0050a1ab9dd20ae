package crdt

import (
	"fmt"
	"slices"
	"strings"
)

// Version is what a map holds of one origin: every write up to Seq.
type Version struct {
	Origin Origin
	Seq    uint64
}

// Digest returns every known, non-dropped origin (hidden ones and the
// map's own included) with its sequence, sorted by origin string.
func (m *Map) Digest() []Version {
	out := make([]Version, 0, len(m.parts))
	for _, p := range m.sortedParts() {
		out = append(out, Version{Origin: p.origin, Seq: p.seq})
	}
	return out
}

// Missing compares a peer's digest with the map and returns the origins
// where the map is ahead, each with the peer's sequence (0 when the peer
// lacks the origin or holds an older epoch of its name), sorted by origin.
func (m *Map) Missing(peer []Version) []Version {
	theirs := make(map[string]Version, len(peer))
	for _, v := range peer {
		if cur, ok := theirs[v.Origin.Name]; !ok || v.Origin.Epoch > cur.Origin.Epoch {
			theirs[v.Origin.Name] = v
		}
	}
	var out []Version
	for _, p := range m.sortedParts() {
		if p.seq == 0 {
			continue
		}
		v, ok := theirs[p.origin.Name]
		switch {
		case !ok || v.Origin.Epoch < p.origin.Epoch:
			out = append(out, Version{Origin: p.origin})
		case v.Origin.Epoch == p.origin.Epoch && v.Seq < p.seq:
			out = append(out, Version{Origin: p.origin, Seq: v.Seq})
		}
	}
	return out
}

// DeltaSince returns the delta over (seq, Seq(o)] from o's bounded delta
// log: applied by a replica holding o up to seq, it brings it to Seq(o).
// When seq is at or past Seq(o) the delta is empty. It returns false when
// the map does not hold o or the log does not reach back to seq: send a
// Snapshot instead.
func (m *Map) DeltaSince(o Origin, seq uint64) (Delta, bool) {
	p := m.exact(o)
	if p == nil {
		return Delta{}, false
	}
	if seq >= p.seq {
		return Delta{Origin: o, From: p.seq, To: p.seq}, true
	}
	if len(p.log.deltas) == 0 || seq < p.log.deltas[0].From {
		return Delta{}, false
	}
	i, _ := slices.BinarySearchFunc(p.log.deltas, seq, func(d Delta, s uint64) int {
		if d.To <= s {
			return -1
		}
		return 1
	})
	d := mergeValid(p.log.deltas[i:])
	d.From = seq
	d.Puts = slices.DeleteFunc(d.Puts, func(put Put) bool { return put.Seq <= seq })
	return d, true
}

// deltaLog keeps the latest deltas of one origin, each owning a copy of its
// keys and values, bounded by count and bytes. Consecutive deltas touch or
// overlap, so any suffix merges into one delta.
type deltaLog struct {
	deltas []Delta
	sizes  []int
	ticks  []uint64 // when each delta was appended (Map.now)
	bytes  int
}

const logEntryOverhead = 16

func deltaBytes(d Delta) int {
	n := 64
	for _, p := range d.Puts {
		n += len(p.Key) + len(p.Value) + logEntryOverhead
	}
	for _, r := range d.Removes {
		n += len(r.Key) + logEntryOverhead
	}
	return n
}

// append records d, copying its keys and values into one buffer, then
// evicts the oldest deltas beyond the bounds.
func (l *deltaLog) append(d Delta, cfg Config, now uint64) {
	if d.IsEmpty() {
		return
	}
	l.appendShared(ownedCopy(d), cfg, now)
}

// appendShared records d as it is: its slices must be the log's alone and
// its keys and values never modified (a map's own writes, whose values are
// arena bytes). Copying them cost every local write an allocation of its
// value (a click's registry writes: 5% of its bytes). While a logged value
// sits in an arena block that compaction has since left behind, it keeps
// that block alive; the log's byte bound counts the values, and the blocks
// its values span hold about as much, since writes fill blocks in order;
// and a delta is dropped after its age bound like any other, so an idle
// map's compacted arena is all it keeps.
func (l *deltaLog) appendShared(d Delta, cfg Config, now uint64) {
	if d.IsEmpty() {
		return
	}
	l.deltas = append(l.deltas, d)
	size := deltaBytes(d)
	l.sizes = append(l.sizes, size)
	l.ticks = append(l.ticks, now)
	l.bytes += size
	for len(l.deltas) > 0 && (len(l.deltas) > cfg.LogMaxDeltas || l.bytes > cfg.LogMaxBytes) {
		l.dropOldest()
	}
}

// expire drops the deltas appended at tick before or earlier; an emptied
// log lets its arrays go too.
func (l *deltaLog) expire(before uint64) {
	for len(l.deltas) > 0 && l.ticks[0] <= before {
		l.dropOldest()
	}
	if len(l.deltas) == 0 && cap(l.deltas) > 0 {
		*l = deltaLog{}
	}
}

func (l *deltaLog) dropOldest() {
	l.bytes -= l.sizes[0]
	l.deltas[0] = Delta{}
	l.deltas, l.sizes, l.ticks = l.deltas[1:], l.sizes[1:], l.ticks[1:]
}

func (l *deltaLog) reset() { *l = deltaLog{} }

// ownedCopy copies d so that it shares no memory with its caller or the
// arena: keys and values live in one new buffer, which is never modified.
func ownedCopy(d Delta) Delta {
	n := 0
	for _, p := range d.Puts {
		n += len(p.Key) + len(p.Value)
	}
	for _, r := range d.Removes {
		n += len(r.Key)
	}
	buf := make([]byte, 0, n)
	str := func(s string) string {
		start := len(buf)
		buf = append(buf, s...)
		return unsafeString(buf[start:])
	}
	out := Delta{Origin: d.Origin, From: d.From, To: d.To}
	if len(d.Puts) > 0 {
		out.Puts = make([]Put, len(d.Puts))
		for i, p := range d.Puts {
			k := str(p.Key)
			start := len(buf)
			buf = append(buf, p.Value...)
			out.Puts[i] = Put{Key: k, Value: buf[start:len(buf):len(buf)], Seq: p.Seq}
		}
	}
	if len(d.Removes) > 0 {
		out.Removes = make([]Removal, len(d.Removes))
		for i, r := range d.Removes {
			out.Removes[i] = Removal{Key: str(r.Key), Seq: r.Seq}
		}
	}
	return out
}

// SnapshotChunk is one piece of a snapshot of an origin's partition at
// sequence Seq. Chunks are numbered from 0; the last has Last set. Entries
// are sorted by key across the whole snapshot; their values may alias the
// map's storage and must not be modified.
type SnapshotChunk struct {
	Origin  Origin
	Seq     uint64
	Index   int
	Last    bool
	Entries []Put
}

// chunkEntryOverhead approximates what an entry adds to a chunk beyond its
// key and value.
const chunkEntryOverhead = 16

// Snapshot returns the partition of origin o in chunks of about
// maxChunkBytes (key and value bytes plus a small per-entry overhead; at
// least one entry per chunk; maxChunkBytes <= 0 means one chunk). An empty
// partition gives one empty last chunk; an unknown origin gives nil.
func (m *Map) Snapshot(o Origin, maxChunkBytes int) []SnapshotChunk {
	p := m.exact(o)
	if p == nil {
		return nil
	}
	all := p.entries.sorted()
	var chunks []SnapshotChunk
	cur := SnapshotChunk{Origin: o, Seq: p.seq}
	size := 0
	keys := make([]byte, 0, keyBytes(all))
	for _, e := range all {
		sz := len(e.key) + len(e.value) + chunkEntryOverhead
		if maxChunkBytes > 0 && len(cur.Entries) > 0 && size+sz > maxChunkBytes {
			chunks = append(chunks, cur)
			cur = SnapshotChunk{Origin: o, Seq: p.seq, Index: len(chunks)}
			size = 0
		}
		start := len(keys)
		keys = append(keys, e.key...)
		cur.Entries = append(cur.Entries, Put{Key: unsafeString(keys[start:]), Value: e.value, Seq: e.seq})
		size += sz
	}
	cur.Last = true
	return append(chunks, cur)
}

func keyBytes(es []tableEntry) int {
	n := 0
	for _, e := range es {
		n += len(e.key)
	}
	return n
}

// SnapshotReceiver rebuilds one origin's partition from snapshot chunks
// consumed in order, and installs it on Commit. The map is not touched
// before Commit.
type SnapshotReceiver struct {
	m       *Map
	origin  Origin
	seq     uint64
	next    int
	last    bool
	done    bool
	err     error
	lastKey string
	entries *table
}

// NewSnapshotReceiver starts receiving a snapshot of origin o at sequence
// seq. An invalid origin or the map's own is reported by Add and Commit.
func (m *Map) NewSnapshotReceiver(o Origin, seq uint64) *SnapshotReceiver {
	r := &SnapshotReceiver{m: m, origin: o, seq: seq, entries: newTable(m.seed)}
	switch {
	case !o.Valid():
		r.err = fmt.Errorf("receiving snapshot: %w", checkOrigin(o))
	case o.Name == m.self.Name && o.Epoch >= m.self.Epoch:
		r.err = fmt.Errorf("receiving snapshot of %s as %s: %w", o, m.self, ErrOwnOrigin)
	}
	return r
}

// Add consumes the next chunk. A chunk for another origin or sequence, out
// of order, after the last one, with keys not strictly ascending, or with an
// invalid entry fails the receiver for good.
func (r *SnapshotReceiver) Add(c SnapshotChunk) error {
	if r.err != nil {
		return r.err
	}
	if err := r.check(c); err != nil {
		r.err = fmt.Errorf("receiving snapshot of %s chunk %d: %w", r.origin, c.Index, err)
		r.entries = nil
		return r.err
	}
	r.entries.reserve(len(c.Entries))
	for _, e := range c.Entries {
		r.entries.insert(e.Key, e.Value, e.Seq) // keys checked strictly ascending: all new
	}
	if n := len(c.Entries); n > 0 {
		r.lastKey = strings.Clone(c.Entries[n-1].Key)
	}
	r.next++
	r.last = c.Last
	return nil
}

func (r *SnapshotReceiver) check(c SnapshotChunk) error {
	switch {
	case r.last || r.done:
		return fmt.Errorf("chunk after the last: %w", ErrMalformedSnapshot)
	case c.Origin != r.origin:
		return fmt.Errorf("chunk for origin %s: %w", c.Origin, ErrMalformedSnapshot)
	case c.Seq != r.seq:
		return fmt.Errorf("chunk at seq %d, want %d: %w", c.Seq, r.seq, ErrMalformedSnapshot)
	case c.Index != r.next:
		return fmt.Errorf("chunk index %d, want %d: %w", c.Index, r.next, ErrMalformedSnapshot)
	case uint64(r.entries.len())+uint64(len(c.Entries)) > r.seq:
		return fmt.Errorf("more entries than writes up to %d: %w", r.seq, ErrMalformedSnapshot)
	case r.entries.len() > 0 && len(c.Entries) > 0 && c.Entries[0].Key <= r.lastKey:
		return fmt.Errorf("key %.64q not after %.64q: %w", c.Entries[0].Key, r.lastKey, ErrMalformedSnapshot)
	}
	return c.validate(r.m.lim)
}

// ValidateSnapshotChunk checks one chunk on its own, as
// SnapshotReceiver.Add does: a valid origin, a non-negative index, at most
// Seq entries, keys strictly ascending, dots in [1, Seq], keys and values
// within cfg's bounds (zero fields take their defaults).
func ValidateSnapshotChunk(c SnapshotChunk, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := checkOrigin(c.Origin); err != nil {
		return fmt.Errorf("validating snapshot chunk: %w", err)
	}
	if c.Index < 0 || uint64(len(c.Entries)) > c.Seq {
		return fmt.Errorf("validating snapshot chunk %d of %s: index or entry count out of range: %w", c.Index, c.Origin, ErrMalformedSnapshot)
	}
	if err := c.validate(limits{maxKey: cfg.MaxKeyLen, maxValue: cfg.MaxValueLen}); err != nil {
		return fmt.Errorf("validating snapshot chunk %d of %s: %w", c.Index, c.Origin, err)
	}
	return nil
}

func (c SnapshotChunk) validate(l limits) error {
	for i, e := range c.Entries {
		if err := checkKey(e.Key, l); err != nil {
			return err
		}
		if err := checkValue(e.Key, e.Value, l); err != nil {
			return err
		}
		if i > 0 && e.Key <= c.Entries[i-1].Key {
			return fmt.Errorf("key %.64q not after %.64q: %w", e.Key, c.Entries[i-1].Key, ErrMalformedSnapshot)
		}
		if e.Seq == 0 || e.Seq > c.Seq {
			return fmt.Errorf("entry %.64q at %d outside [1, %d]: %w", e.Key, e.Seq, c.Seq, ErrMalformedSnapshot)
		}
	}
	return nil
}

// Commit replaces the origin's partition with the received one atomically,
// reporting the visible differences through OnChange. It returns false,
// changing nothing, when the snapshot is no longer useful: the origin was
// dropped or superseded by a newer epoch meanwhile, or the map already holds
// it at or past the snapshot's sequence (so an empty snapshot at 0 never
// changes anything). It fails before the last chunk and
// after a failed Add; a receiver commits at most once.
func (r *SnapshotReceiver) Commit() (bool, error) {
	if r.err != nil {
		return false, r.err
	}
	if !r.last || r.done {
		return false, fmt.Errorf("committing snapshot of %s: not complete or already committed: %w", r.origin, ErrMalformedSnapshot)
	}
	r.done = true
	m := r.m
	ch := m.changes()
	defer ch.emit()
	if m.Seq(r.origin) >= r.seq {
		return false, nil
	}
	p, ignored, err := m.admit(r.origin, ch)
	if err != nil {
		return false, fmt.Errorf("committing snapshot: %w", err)
	}
	if ignored {
		return false, nil
	}
	if (!p.hidden && m.onChange != nil) || (p.hidden && m.onHidden != nil) {
		diff(p.entries.sorted(), r.entries.sorted(), func(key []byte, old, new []byte) {
			ch.addTo(p, string(key), old, new)
		})
	}
	p.entries, p.seq = r.entries, r.seq
	p.log.reset()
	r.entries = nil
	return true, nil
}

// diff walks two key-sorted entry lists and reports every key whose value
// differs, with nil for a missing side.
func diff(a, b []tableEntry, fn func(key, old, new []byte)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && string(a[i].key) < string(b[j].key)):
			fn(a[i].key, a[i].value, nil)
			i++
		case i == len(a) || string(b[j].key) < string(a[i].key):
			fn(b[j].key, nil, b[j].value)
			j++
		default:
			fn(a[i].key, a[i].value, b[j].value)
			i++
			j++
		}
	}
}
