package crdt

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
)

// Config bounds a Map. Zero (or negative) fields take their defaults.
type Config struct {
	// Registry names the replicated registry; it is passed through to Change.
	Registry string
	// LogMaxDeltas bounds each origin's delta log by count (default 1024).
	LogMaxDeltas int
	// LogMaxBytes bounds each origin's delta log by the bytes of its keys
	// and values plus a small per-entry overhead (default 1 MiB).
	LogMaxBytes int
	// LogMaxTicks bounds each origin's delta log by age: a delta appended
	// LogMaxTicks ticks ago or earlier is dropped at the next Tick
	// (default 30; with the cluster's 1 s anti-entropy tick, 30 s). A
	// peer behind by more catches up from a snapshot, as beyond the other
	// bounds. It lets an idle node hold no logs at all: under load they
	// fill to the bounds above, scattered over the heap.
	LogMaxTicks uint64
	// MaxKeyLen is the longest key accepted, in bytes (default 256).
	MaxKeyLen int
	// MaxValueLen is the longest value accepted, in bytes (default 1 MiB).
	MaxValueLen int
	// DropMemory is how many ticks a dropped epoch is remembered so late
	// deltas and snapshots cannot resurrect it (default 600).
	DropMemory uint64
}

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{
		LogMaxDeltas: 1024,    // ~1 s of writes at a busy node; older gaps get a snapshot
		LogMaxBytes:  1 << 20, // per origin, so a 50-node cluster keeps at most ~50 MiB of logs
		LogMaxTicks:  30,      // with a 1 s tick: 30 s, many anti-entropy rounds
		MaxKeyLen:    256,     // session ids, tool names and connection ids are far shorter
		MaxValueLen:  1 << 20, // registry values are small JSON/protobuf records
		DropMemory:   600,     // with a 1 s tick: 10 minutes, far above any relay delay
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.LogMaxDeltas <= 0 {
		c.LogMaxDeltas = d.LogMaxDeltas
	}
	if c.LogMaxBytes <= 0 {
		c.LogMaxBytes = d.LogMaxBytes
	}
	if c.LogMaxTicks == 0 {
		c.LogMaxTicks = d.LogMaxTicks
	}
	if c.MaxKeyLen <= 0 {
		c.MaxKeyLen = d.MaxKeyLen
	}
	if c.MaxValueLen <= 0 {
		c.MaxValueLen = d.MaxValueLen
	}
	if c.DropMemory == 0 {
		c.DropMemory = d.DropMemory
	}
	return c
}

// Change is one change of an entry: a visible one (OnChange), or one to a
// hidden origin's entries (OnHiddenChange). Old is nil when the entry was
// added; New is nil when it was removed, hidden or dropped. Old and New may
// alias the map's storage and must not be modified.
type Change struct {
	Registry string
	Key      string
	Origin   Origin
	Old, New []byte
	// Hidden: the change is to a hidden origin's entries (remote data that
	// arrived while its origin is dead or unreachable). Only OnHiddenChange
	// reports such changes.
	Hidden bool
}

// Entry is one visible entry. Value aliases the map's storage: it stays
// valid and unchanged, but must not be modified.
type Entry struct {
	Key    string
	Value  []byte
	Origin Origin
	Seq    uint64
}

// ApplyResult says what Apply did with a delta.
type ApplyResult struct {
	// Applied is true when the delta advanced the origin's sequence.
	Applied bool
	// Gap is true when the delta starts after what the map holds: the caller
	// must ask for catch-up from Have.
	Gap bool
	// Have is the map's sequence for the delta's origin after the call.
	Have uint64
	// Ignored is true when the origin is dropped, or older than the epoch the
	// map holds for its name: nothing changed.
	Ignored bool
}

// Map is the owner-partitioned delta-state map: per origin, a sequence
// number and the entries that origin wrote. It holds at most one epoch per
// node name. Not safe for concurrent use (callers lock).
type Map struct {
	self     Origin
	cfg      Config
	lim      limits
	seed     maphash.Seed
	parts    map[string]*partition // by origin name
	order    []*partition          // parts sorted by origin; nil when stale
	dropped  map[string]dropMark   // by origin name
	now      uint64
	onChange func(Change)
	onHidden func(Change)
}

// partition is one origin's share of the map.
type partition struct {
	origin  Origin
	seq     uint64
	hidden  bool
	entries *table
	log     deltaLog
}

// dropMark remembers that epochs up to epoch of a name were dropped, until
// the logical time until.
type dropMark struct {
	epoch uint64
	until uint64
}

// New returns an empty map whose own origin is self. It panics if self is
// not a valid origin, which is a programming error.
func New(self Origin, cfg Config) *Map {
	if !self.Valid() {
		panic(fmt.Sprintf("crdt: New with invalid origin %q", self.String()))
	}
	cfg = cfg.withDefaults()
	m := &Map{
		self:    self,
		cfg:     cfg,
		lim:     limits{maxKey: cfg.MaxKeyLen, maxValue: cfg.MaxValueLen},
		seed:    maphash.MakeSeed(),
		parts:   make(map[string]*partition),
		dropped: make(map[string]dropMark),
	}
	m.setPartition(m.newPartition(self))
	return m
}

// setPartition installs p as the partition of its name.
func (m *Map) setPartition(p *partition) {
	m.parts[p.origin.Name] = p
	m.order = nil
}

func (m *Map) newPartition(o Origin) *partition {
	return &partition{origin: o, entries: newTable(m.seed)}
}

// Self returns the map's own origin.
func (m *Map) Self() Origin { return m.self }

// Config returns the map's bounds, defaults filled in.
func (m *Map) Config() Config { return m.cfg }

// OnChange sets the function called synchronously, after the map is
// consistent again, for every visible change: local and remote writes,
// hide and unhide, drop, epoch replacement and snapshots. A change that
// leaves the value's bytes as they were is not reported. nil disables it.
func (m *Map) OnChange(fn func(Change)) { m.onChange = fn }

// OnHiddenChange sets the function called, like OnChange's, for every
// change remote data makes to a hidden origin's entries (Change.Hidden is
// set): what a dead origin last wrote can still reach this node through
// the peers that relay it, and a reader of dead origins' data (a standby
// deciding whether to take over) must see it. Hiding, unhiding and
// dropping are not reported here. nil disables it.
func (m *Map) OnHiddenChange(fn func(Change)) { m.onHidden = fn }

// changes collects the changes of one operation when someone listens.
type changes struct {
	m   *Map
	buf []Change
}

func (m *Map) changes() *changes { return &changes{m: m} }

func (c *changes) add(key string, o Origin, old, new []byte) {
	if c.m.onChange == nil || (old != nil && new != nil && bytes.Equal(old, new)) {
		return
	}
	c.buf = append(c.buf, Change{Registry: c.m.cfg.Registry, Key: key, Origin: o, Old: old, New: new})
}

// addHidden records a change to a hidden partition's entries.
func (c *changes) addHidden(key string, o Origin, old, new []byte) {
	if c.m.onHidden == nil || (old != nil && new != nil && bytes.Equal(old, new)) {
		return
	}
	c.buf = append(c.buf, Change{Registry: c.m.cfg.Registry, Key: key, Origin: o, Old: old, New: new, Hidden: true})
}

// addTo records a change to p's entries as visible or hidden.
func (c *changes) addTo(p *partition, key string, old, new []byte) {
	if p.hidden {
		c.addHidden(key, p.origin, old, new)
	} else {
		c.add(key, p.origin, old, new)
	}
}

func (c *changes) emit() {
	for _, ch := range c.buf {
		if ch.Hidden {
			c.m.onHidden(ch)
		} else {
			c.m.onChange(ch)
		}
	}
}

// Put writes key = value in the map's own partition and returns the delta
// to ship. It fails on an empty, over-long or non-UTF-8 key and on an
// over-long value, changing nothing.
func (m *Map) Put(key string, value []byte) (Delta, error) {
	if err := checkKey(key, m.lim); err != nil {
		return Delta{}, fmt.Errorf("putting %.64q: %w", key, err)
	}
	if err := checkValue(key, value, m.lim); err != nil {
		return Delta{}, fmt.Errorf("putting %.64q: %w", key, err)
	}
	p := m.parts[m.self.Name]
	p.seq++
	old, stored, _ := p.entries.putNewer(key, value, p.seq)
	d := Delta{Origin: m.self, From: p.seq - 1, To: p.seq, Puts: []Put{{Key: key, Value: stored, Seq: p.seq}}}
	// The log shares the stored value: arena bytes are never modified
	// (compaction writes fresh blocks), so no copy is needed, only a slice
	// of its own, since d's goes to the caller.
	p.log.appendShared(Delta{Origin: d.Origin, From: d.From, To: d.To, Puts: []Put{d.Puts[0]}}, m.cfg, m.now)
	ch := m.changes()
	ch.add(key, m.self, old, stored)
	ch.emit()
	return d, nil
}

// Remove removes key from the map's own partition and returns the delta to
// ship, or false (and no delta) when the key is absent.
func (m *Map) Remove(key string) (Delta, bool) {
	p := m.parts[m.self.Name]
	old, dot, ok := p.entries.get(key)
	if !ok {
		return Delta{}, false
	}
	p.seq++
	p.entries.del(key)
	d := Delta{Origin: m.self, From: p.seq - 1, To: p.seq, Removes: []Removal{{Key: key, Seq: dot}}}
	p.log.append(d, m.cfg, m.now)
	ch := m.changes()
	ch.add(key, m.self, old, nil)
	ch.emit()
	return d, true
}

// Apply applies a remote delta that continues what the map holds for its
// origin; what it already holds is skipped, so applying twice is harmless.
// A delta starting after the map's sequence is a gap: nothing is applied and
// the caller must ask for catch-up from ApplyResult.Have. A delta for a newer
// epoch of a name drops the older epoch at once; one for a dropped or older
// epoch is ignored. A malformed delta (see ErrMalformedDelta), one for the
// map's own origin, or with invalid keys or values, is an error and changes
// nothing.
func (m *Map) Apply(d Delta) (ApplyResult, error) {
	if err := d.validate(m.lim); err != nil {
		return ApplyResult{}, fmt.Errorf("applying delta: %w", err)
	}
	ch := m.changes()
	defer ch.emit()
	p, ignored, err := m.admit(d.Origin, ch)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("applying delta: %w", err)
	}
	if ignored {
		return ApplyResult{Ignored: true}, nil
	}
	if d.To <= p.seq {
		return ApplyResult{Have: p.seq}, nil
	}
	if d.From > p.seq {
		return ApplyResult{Gap: true, Have: p.seq}, nil
	}
	for _, r := range d.Removes {
		old, held, ok := p.entries.get(r.Key)
		if !ok || held > r.Seq {
			continue
		}
		p.entries.del(r.Key)
		ch.addTo(p, r.Key, old, nil)
	}
	for _, put := range d.Puts {
		if old, stored, ok := p.entries.putNewer(put.Key, put.Value, put.Seq); ok {
			ch.addTo(p, put.Key, old, stored)
		}
	}
	p.seq = d.To
	p.log.append(d, m.cfg, m.now)
	return ApplyResult{Applied: true, Have: p.seq}, nil
}

// admit finds or makes the partition remote data for o goes to, applying
// epoch replacement. It reports ignored when o is dropped or superseded,
// and fails for the map's own origin or a newer incarnation of its name.
func (m *Map) admit(o Origin, ch *changes) (p *partition, ignored bool, err error) {
	if o.Name == m.self.Name {
		if o.Epoch >= m.self.Epoch {
			return nil, false, fmt.Errorf("admitting %s as %s: %w", o, m.self, ErrOwnOrigin)
		}
		return nil, true, nil
	}
	if m.isDropped(o) {
		return nil, true, nil
	}
	p = m.parts[o.Name]
	switch {
	case p == nil:
	case p.origin.Epoch > o.Epoch:
		return nil, true, nil
	case p.origin.Epoch < o.Epoch:
		m.removePartition(p, ch)
		p = nil
	}
	if p == nil {
		p = m.newPartition(o)
		m.setPartition(p)
	}
	return p, false, nil
}

func (m *Map) isDropped(o Origin) bool {
	mk, ok := m.dropped[o.Name]
	return ok && o.Epoch <= mk.epoch
}

// removePartition deletes p, reporting its visible entries as removed.
func (m *Map) removePartition(p *partition, ch *changes) {
	delete(m.parts, p.origin.Name)
	m.order = nil
	if p.hidden || m.onChange == nil {
		return
	}
	for _, e := range p.entries.sorted() {
		ch.add(string(e.key), p.origin, e.value, nil)
	}
}

// Get returns the visible entry key of origin o.
func (m *Map) Get(o Origin, key string) (Entry, bool) {
	p := m.visible(o)
	if p == nil {
		return Entry{}, false
	}
	v, s, ok := p.entries.get(key)
	if !ok {
		return Entry{}, false
	}
	return Entry{Key: key, Value: v, Origin: o, Seq: s}, true
}

// Lookup returns the visible entries with this key across origins (the
// same key may exist under several origins), sorted by origin.
func (m *Map) Lookup(key string) []Entry {
	var out []Entry
	for _, p := range m.sortedParts() {
		if p.hidden {
			continue
		}
		if v, s, ok := p.entries.get(key); ok {
			out = append(out, Entry{Key: key, Value: v, Origin: p.origin, Seq: s})
		}
	}
	return out
}

// Range calls fn for every visible entry, ordered by origin then key, until
// fn returns false.
func (m *Map) Range(fn func(Entry) bool) {
	for _, p := range m.sortedParts() {
		if !p.hidden && !rangePartition(p, fn) {
			return
		}
	}
}

// RangeOrigin calls fn for every visible entry of origin o, ordered by key,
// until fn returns false.
func (m *Map) RangeOrigin(o Origin, fn func(Entry) bool) {
	if p := m.visible(o); p != nil {
		rangePartition(p, fn)
	}
}

func rangePartition(p *partition, fn func(Entry) bool) bool {
	for _, e := range p.entries.sorted() {
		if !fn(Entry{Key: string(e.key), Value: e.value, Origin: p.origin, Seq: e.seq}) {
			return false
		}
	}
	return true
}

// Count returns the number of visible entries across origins, without
// visiting them (a metrics scrape asks: Range would sort and copy every
// entry of every partition each time).
func (m *Map) Count() int {
	n := 0
	for _, p := range m.parts {
		if !p.hidden {
			n += p.entries.len()
		}
	}
	return n
}

// Len returns the number of visible entries of origin o.
func (m *Map) Len(o Origin) int {
	if p := m.visible(o); p != nil {
		return p.entries.len()
	}
	return 0
}

// Seq returns the map's sequence for origin o: 0 for an unknown, dropped or
// superseded origin.
func (m *Map) Seq(o Origin) uint64 {
	if p := m.exact(o); p != nil {
		return p.seq
	}
	return 0
}

func (m *Map) exact(o Origin) *partition {
	if p := m.parts[o.Name]; p != nil && p.origin == o {
		return p
	}
	return nil
}

func (m *Map) visible(o Origin) *partition {
	if p := m.exact(o); p != nil && !p.hidden {
		return p
	}
	return nil
}

// sortedParts returns the partitions sorted by origin. The slice is shared
// until the set of partitions changes; callers must not modify it.
func (m *Map) sortedParts() []*partition {
	if m.order == nil {
		ps := make([]*partition, 0, len(m.parts))
		for _, p := range m.parts {
			ps = append(ps, p)
		}
		slices.SortFunc(ps, func(a, b *partition) int { return a.origin.Compare(b.origin) })
		m.order = ps
	}
	return m.order
}
