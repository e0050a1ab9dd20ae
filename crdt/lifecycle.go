package crdt

// Hide makes the entries of origin o invisible to reads and Range while
// keeping them (and still applying deltas to them), e.g. while its node is
// suspected dead; OnChange reports them as removed. Hiding an origin the map
// does not know yet records it hidden, so later deltas stay invisible; hiding
// a newer epoch than the one held drops the older one. The map's own origin,
// older epochs and dropped epochs are left alone.
func (m *Map) Hide(o Origin) {
	if !o.Valid() || o.Name == m.self.Name || m.isDropped(o) {
		return
	}
	ch := m.changes()
	defer ch.emit()
	p := m.parts[o.Name]
	if p != nil && p.origin.Epoch > o.Epoch {
		return
	}
	if p == nil || p.origin.Epoch < o.Epoch {
		if p != nil {
			m.removePartition(p, ch)
		}
		p = m.newPartition(o)
		p.hidden = true
		m.setPartition(p)
		return
	}
	if p.hidden {
		return
	}
	p.hidden = true
	if m.onChange != nil {
		for _, e := range p.entries.sorted() {
			ch.add(string(e.key), o, e.value, nil)
		}
	}
}

// Unhide makes a hidden origin's entries visible again (e.g. a suspect peer
// came back alive); OnChange reports them as added.
func (m *Map) Unhide(o Origin) {
	p := m.exact(o)
	if p == nil || !p.hidden {
		return
	}
	p.hidden = false
	ch := m.changes()
	if m.onChange != nil {
		for _, e := range p.entries.sorted() {
			ch.add(string(e.key), o, nil, e.value)
		}
	}
	ch.emit()
}

// Hidden reports whether origin o is held and hidden.
func (m *Map) Hidden(o Origin) bool {
	p := m.exact(o)
	return p != nil && p.hidden
}

// Drop deletes the partition of origin o (and of any older epoch of its
// name) and remembers every epoch up to o's as dropped for
// Config.DropMemory ticks, so late deltas and snapshots cannot resurrect
// it. OnChange reports its visible entries as removed. The map's own name is
// never dropped.
func (m *Map) Drop(o Origin) {
	if !o.Valid() || o.Name == m.self.Name {
		return
	}
	mk := m.dropped[o.Name]
	mk.epoch = max(mk.epoch, o.Epoch)
	mk.until = max(mk.until, m.now+m.cfg.DropMemory)
	m.dropped[o.Name] = mk
	p := m.parts[o.Name]
	if p == nil || p.origin.Epoch > o.Epoch {
		return
	}
	ch := m.changes()
	m.removePartition(p, ch)
	ch.emit()
}

// Readmit forgets that origin o itself was dropped, so its data is
// accepted again; older epochs of its name stay refused. For an origin that
// membership reports alive again with the same epoch: a node wrongly
// declared dead, e.g. cut off by a partition for longer than the grace.
// It reports whether o was dropped.
func (m *Map) Readmit(o Origin) bool {
	mk, ok := m.dropped[o.Name]
	if !ok || mk.epoch != o.Epoch {
		return false
	}
	if mk.epoch = o.Epoch - 1; mk.epoch == 0 {
		delete(m.dropped, o.Name)
	} else {
		m.dropped[o.Name] = mk
	}
	return true
}

// Dropped reports whether data for origin o would be ignored because o, or
// a newer epoch of its name, was dropped and is still remembered.
func (m *Map) Dropped(o Origin) bool { return m.isDropped(o) }

// Tick advances the logical clock that expires the memory of dropped
// epochs and the delta logs older than Config.LogMaxTicks, and compacts
// the partitions nobody wrote since the previous tick (an idle node gives
// back the arena's dead bytes and slack).
//
// The map's own partition waits until its log has expired too: its logged
// puts are arena bytes (appendShared), so compacting while the log holds
// them keeps the old blocks alive beside the new ones for up to
// LogMaxTicks, which doubled an idle node's arena after a burst instead of
// shrinking it. Other partitions' logs hold copies and never wait.
func (m *Map) Tick() {
	m.now++
	for name, mk := range m.dropped {
		if mk.until <= m.now {
			delete(m.dropped, name)
		}
	}
	for _, p := range m.parts {
		if m.now >= m.cfg.LogMaxTicks {
			p.log.expire(m.now - m.cfg.LogMaxTicks)
		}
		if p.origin == m.self && len(p.log.deltas) > 0 {
			continue
		}
		p.entries.tidy()
	}
}
