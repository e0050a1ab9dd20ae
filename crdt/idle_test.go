package crdt

import (
	"fmt"
	"testing"
)

// A delta log keeps a delta for Config.LogMaxTicks ticks: within that a
// peer behind catches up from the log; after it, from a snapshot (DeltaSince
// says so), and a map that nobody wrote for that long holds no log at all,
// of its own origin or of any other.
func TestDeltaLogsExpireByAge(t *testing.T) {
	cfg := Config{LogMaxTicks: 3}
	a := New(Origin{Name: "a", Epoch: 1}, cfg)
	b := New(Origin{Name: "b", Epoch: 1}, cfg)
	for i := range 4 {
		d, err := a.Put(fmt.Sprintf("k%d", i), []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	a.Tick()
	a.Tick()
	b.Tick()
	b.Tick()
	// Two ticks old: a peer at seq 1 still gets a delta, from either node.
	for _, m := range []*Map{a, b} {
		if d, ok := m.DeltaSince(a.Self(), 1); !ok || d.From != 1 || d.To != 4 || len(d.Puts) != 3 {
			t.Fatalf("%s: DeltaSince(a, 1) = %+v, %v; want the 3 later puts", m.Self(), d, ok)
		}
	}
	d, err := a.Put("k4", []byte("v")) // written at tick 2
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(d); err != nil {
		t.Fatal(err)
	}
	a.Tick()
	b.Tick()
	// Three ticks: the first four deltas are gone, the fifth is kept.
	for _, m := range []*Map{a, b} {
		if _, ok := m.DeltaSince(a.Self(), 1); ok {
			t.Fatalf("%s: a peer 3 ticks behind still catches up from the log", m.Self())
		}
		if d, ok := m.DeltaSince(a.Self(), 4); !ok || len(d.Puts) != 1 || d.Puts[0].Key != "k4" {
			t.Fatalf("%s: DeltaSince(a, 4) = %+v, %v; want k4", m.Self(), d, ok)
		}
	}
	for range 2 {
		a.Tick()
		b.Tick()
	}
	for _, m := range []*Map{a, b} {
		p := m.parts["a"]
		if len(p.log.deltas) != 0 || cap(p.log.deltas) != 0 || p.log.bytes != 0 {
			t.Fatalf("%s: an idle map still holds %d deltas (%d bytes, capacity %d)", m.Self(), len(p.log.deltas), p.log.bytes, cap(p.log.deltas))
		}
		// Up to date needs no log.
		if d, ok := m.DeltaSince(a.Self(), 5); !ok || !d.IsEmpty() {
			t.Fatalf("%s: DeltaSince(a, 5) = %+v, %v; want an empty delta", m.Self(), d, ok)
		}
	}
}

// A partition nobody wrote for a whole tick is compacted at the next one
// into blocks sized to its live entries: after a burst of short-lived
// entries (sessions, tools), an idle node keeps the survivors' bytes, not
// the burst's. The map's own partition waits for its delta log to expire
// first, since the logged puts are arena bytes: compacting earlier would
// keep the old blocks alive beside the new ones. One still being written
// is left to the usual thresholds.
func TestIdlePartitionsGiveBackTheirArena(t *testing.T) {
	cfg := Config{LogMaxTicks: 3}
	m := New(Origin{Name: "a", Epoch: 1}, cfg)
	value := make([]byte, 200)
	for i := range 2000 {
		if _, err := m.Put(fmt.Sprintf("session-%04d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 2000; i++ {
		m.Remove(fmt.Sprintf("session-%04d", i))
	}
	arena := func() int { return arenaBytes(m.parts["a"].entries) }
	live := m.parts["a"].entries.live
	first := &m.parts["a"].entries.blocks[0][0]
	for tick := 1; tick <= int(cfg.LogMaxTicks); tick++ {
		m.Tick() // the burst is logged until tick LogMaxTicks: left alone
		if got := arena(); got < 64<<10 || &m.parts["a"].entries.blocks[0][0] != first {
			t.Fatalf("tick %d: the partition was compacted while its log still held the burst (arena %d bytes)", tick, got)
		}
	}
	if n := len(m.parts["a"].log.deltas); n != 0 {
		t.Fatalf("after %d ticks the log still holds %d deltas", cfg.LogMaxTicks, n)
	}
	m.Tick()
	tb := m.parts["a"].entries
	if got := arena(); tb.garbage != 0 || got != live || tb.live != live {
		t.Fatalf("after an idle tick: arena %d bytes, garbage %d, live %d; want %d live bytes and nothing else", got, tb.garbage, tb.live, live)
	}
	for i := range 10 {
		if e, ok := m.Get(m.Self(), fmt.Sprintf("session-%04d", i)); !ok || len(e.Value) != len(value) {
			t.Fatalf("session-%04d lost in the compaction", i)
		}
	}
	// Written again: a fresh block, then tidied once idle again.
	if _, err := m.Put("session-x", value); err != nil {
		t.Fatal(err)
	}
	for range cfg.LogMaxTicks + 1 {
		m.Tick()
	}
	if tb := m.parts["a"].entries; tb.garbage != 0 || arena() != tb.live {
		t.Fatalf("after the next idle spell: arena %d, live %d, garbage %d", arena(), tb.live, tb.garbage)
	}
}

// Another origin's partition logs copies, not arena bytes, so it is
// compacted as soon as it has been idle for a tick, log or no log.
func TestOtherOriginsPartitionsTidyWithoutWaitingForTheLog(t *testing.T) {
	a := New(Origin{Name: "a", Epoch: 1}, Config{})
	b := New(Origin{Name: "b", Epoch: 1}, Config{})
	value := make([]byte, 200)
	for i := range 500 {
		d, err := a.Put(fmt.Sprintf("session-%04d", i), value)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	b.Tick()
	b.Tick()
	p := b.parts["a"]
	if len(p.log.deltas) == 0 {
		t.Fatal("b's copy of a's log expired: the test covers nothing")
	}
	requireFitted(t, p.entries, encodedSize("session-0000", value, 1000))
}

// Survivors of more than one block are tidied into blocks sized to what
// is left to copy, not into full blocks after the first: an idle table
// larger than a block keeps its live bytes and at most an entry's worth of
// slack a block, not up to a block's worth of empty tail.
func TestIdleTidyFitsEveryBlockToTheSurvivors(t *testing.T) {
	m := New(Origin{Name: "a", Epoch: 1}, Config{})
	value := make([]byte, 300)
	for i := range 1500 {
		if _, err := m.Put(fmt.Sprintf("tools-%04d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 1500; i += 3 {
		m.Remove(fmt.Sprintf("tools-%04d", i))
	}
	for range DefaultConfig().LogMaxTicks + 1 {
		m.Tick()
	}
	tb := m.parts["a"].entries
	if len(tb.blocks) < 3 {
		t.Fatalf("the survivors fit in %d blocks: the test covers nothing", len(tb.blocks))
	}
	requireFitted(t, tb, encodedSize("tools-0000", value, 1<<20))
	for i := 1; i < 1500; i += 3 {
		if e, ok := m.Get(m.Self(), fmt.Sprintf("tools-%04d", i)); !ok || len(e.Value) != len(value) {
			t.Fatalf("tools-%04d lost in the tidy", i)
		}
	}
}

// arenaBytes is the capacity of a table's small-entry blocks.
func arenaBytes(tb *table) (capacity int) {
	for _, b := range tb.blocks {
		capacity += cap(b)
	}
	return capacity
}

// requireFitted fails unless tb holds no garbage and its blocks hold its
// live bytes with at most one entry's worth of slack each (an entry never
// straddles two blocks).
func requireFitted(t *testing.T, tb *table, entry int) {
	t.Helper()
	capacity := arenaBytes(tb)
	if slack := capacity - tb.live; tb.garbage != 0 || slack < 0 || slack > len(tb.blocks)*entry {
		t.Fatalf("after an idle tick: %d blocks holding %d bytes for %d live (garbage %d); want at most %d bytes of slack a block",
			len(tb.blocks), capacity, tb.live, tb.garbage, entry)
	}
}
