package crdt

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestNoResurrection drives a replica with the deltas and snapshots of three
// incarnations of one node (a@1 < a@2 < a@3), delivered late, duplicated and
// out of order, interleaved with Hide, Unhide and Drop. It checks that a
// hidden origin shows nothing, a dropped epoch (or an older one) never
// shows again nor advances, an epoch older than one the replica has held
// never shows again, each partition is always exactly its owner's state at
// some seq, and the change feed agrees with Range.
func TestNoResurrection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{LogMaxDeltas: 4, DropMemory: 1 << 30}
		r := newReplica(Origin{Name: "r", Epoch: 1}, cfg, t.Fatalf)
		var owners []*Map
		var hists []*history
		for e := uint64(1); e <= 3; e++ {
			o := Origin{Name: "a", Epoch: e}
			owners = append(owners, New(o, cfg))
			hists = append(hists, newHistory(o))
		}
		keys := rapid.SampledFrom([]string{"k0", "k1", "k2"})
		var net []Delta
		var droppedUpTo, heldAtLeast uint64
		steps := rapid.IntRange(1, 100).Draw(t, "steps")
		for range steps {
			inc := rapid.IntRange(0, 2).Draw(t, "incarnation")
			o := owners[inc].Self()
			switch rapid.IntRange(0, 7).Draw(t, "action") {
			case 0, 1: // the owner writes; the delta goes on the wire
				k := keys.Draw(t, "key")
				var d Delta
				if _, has := owners[inc].Get(o, k); has && rapid.Bool().Draw(t, "remove") {
					d, _ = owners[inc].Remove(k)
				} else {
					d, _ = owners[inc].Put(k, fmt.Appendf(nil, "%d.%d", o.Epoch, len(hists[inc].deltas)+1))
				}
				hists[inc].record(d)
				net = append(net, d)
			case 2, 3: // deliver any delta, maybe keeping a duplicate
				if len(net) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(net)-1).Draw(t, "deliver")
				d := net[k]
				if !rapid.Bool().Draw(t, "duplicate") {
					net = slices.Delete(net, k, k+1)
				}
				res, err := r.m.Apply(d)
				if err != nil {
					t.Fatalf("apply %s: %v", formatDelta(d), err)
				}
				if d.Origin.Epoch <= droppedUpTo && !res.Ignored {
					t.Fatalf("delta %s for a dropped epoch (<= %d) not ignored: %+v", formatDelta(d), droppedUpTo, res)
				}
			case 4: // a snapshot of the owner's current state arrives
				if !deliverSnapshot(t, r.m, owners[inc]) {
					continue
				}
				if o.Epoch <= droppedUpTo {
					t.Fatalf("snapshot of dropped %s committed", o)
				}
			case 5:
				r.m.Hide(o)
			case 6:
				r.m.Unhide(o)
			case 7:
				r.m.Drop(o)
				droppedUpTo = max(droppedUpTo, o.Epoch)
			}
			for _, v := range r.m.Digest() {
				if v.Origin.Name == "a" {
					heldAtLeast = max(heldAtLeast, v.Origin.Epoch)
				}
			}
			r.m.Range(func(e Entry) bool {
				switch {
				case e.Origin.Name != "a":
				case e.Origin.Epoch <= droppedUpTo:
					t.Fatalf("entry %s of dropped %s visible", e.Key, e.Origin)
				case e.Origin.Epoch < heldAtLeast:
					t.Fatalf("entry %s of %s visible after a@%d was held", e.Key, e.Origin, heldAtLeast)
				case r.m.Hidden(e.Origin):
					t.Fatalf("entry %s of hidden %s visible", e.Key, e.Origin)
				}
				return true
			})
			for _, h := range hists {
				if h.origin.Epoch <= droppedUpTo && r.m.Seq(h.origin) != 0 {
					t.Fatalf("dropped %s still at seq %d", h.origin, r.m.Seq(h.origin))
				}
				checkPrefix(t, r.m, h)
			}
			r.checkView()
		}
	})
}

// deliverSnapshot copies owner's own partition into m by chunks and reports
// whether m committed it.
func deliverSnapshot(t *rapid.T, m, owner *Map) bool {
	chunks := owner.Snapshot(owner.Self(), rapid.SampledFrom([]int{0, 20}).Draw(t, "chunkBytes"))
	rcv := m.NewSnapshotReceiver(owner.Self(), chunks[0].Seq)
	for _, c := range chunks {
		if err := rcv.Add(c); err != nil {
			t.Fatalf("snapshot chunk: %v", err)
		}
	}
	ok, err := rcv.Commit()
	if err != nil {
		t.Fatalf("snapshot commit: %v", err)
	}
	return ok
}

// TestDropMemoryExpires pins down how long a dropped epoch is remembered:
// exactly DropMemory ticks, after which the origin may come back.
func TestDropMemoryExpires(t *testing.T) {
	owner := New(originA, Config{})
	d, _ := owner.Put("k", []byte("v"))
	m := New(originB, Config{DropMemory: 3})
	if _, err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	m.Drop(originA)
	for tick := range 3 {
		res, err := m.Apply(d)
		if err != nil || !res.Ignored {
			t.Fatalf("after %d ticks: %+v %v, want ignored", tick, res, err)
		}
		if _, ok := m.Get(originA, "k"); ok {
			t.Fatalf("after %d ticks: dropped entry visible", tick)
		}
		m.Tick()
	}
	if res, err := m.Apply(d); err != nil || !res.Applied {
		t.Fatalf("after the memory expired: %+v %v, want applied", res, err)
	}
}
