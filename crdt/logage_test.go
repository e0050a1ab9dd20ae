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
