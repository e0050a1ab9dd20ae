package crdt

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// replica is one map under test plus the view its change feed builds.
type replica struct {
	m    *Map
	view map[string]string // origin/key -> value, maintained from OnChange only
	fail func(string, ...any)
}

func newReplica(o Origin, cfg Config, fail func(string, ...any)) *replica {
	r := &replica{m: New(o, cfg), view: map[string]string{}, fail: fail}
	r.m.OnChange(r.observe)
	return r
}

// observe checks each change against the view before applying it: an add
// must be new, a removal or update must start from the value last reported.
func (r *replica) observe(c Change) {
	id := c.Origin.String() + "/" + c.Key
	cur, ok := r.view[id]
	switch {
	case c.Old == nil && ok, c.Old != nil && (!ok || cur != string(c.Old)):
		r.fail("%s: change %s old=%q new=%q, view has %q (%v)", r.m.Self(), id, c.Old, c.New, cur, ok)
	}
	if c.New == nil {
		delete(r.view, id)
	} else {
		r.view[id] = string(c.New)
	}
}

func (r *replica) checkView() {
	want := map[string]string{}
	for id, e := range visibleState(r.m) {
		want[id] = e.Value
	}
	if !maps.Equal(r.view, want) {
		r.fail("%s: change feed view %v, Range %v", r.m.Self(), r.view, want)
	}
	if n := r.m.Count(); n != len(want) {
		r.fail("%s: Count %d, Range visits %d", r.m.Self(), n, len(want))
	}
}

type message struct {
	to int
	d  Delta
}

// pull runs one anti-entropy exchange: dst sends its digest to src, src
// answers with deltas from its log or snapshots, dst applies them.
func pull(t *rapid.T, dst, src *replica, chunkBytes int) {
	for _, v := range src.m.Missing(dst.m.Digest()) {
		if d, ok := src.m.DeltaSince(v.Origin, v.Seq); ok {
			res, err := dst.m.Apply(d)
			if err != nil || res.Gap {
				t.Fatalf("catch-up %s -> %s: %+v %v", formatDelta(d), dst.m.Self(), res, err)
			}
			continue
		}
		chunks := src.m.Snapshot(v.Origin, chunkBytes)
		rcv := dst.m.NewSnapshotReceiver(v.Origin, chunks[0].Seq)
		for _, c := range chunks {
			if err := rcv.Add(c); err != nil {
				t.Fatalf("snapshot chunk %d of %s: %v", c.Index, v.Origin, err)
			}
		}
		if ok, err := rcv.Commit(); err != nil || !ok {
			t.Fatalf("snapshot commit of %s at %d into %s: %v %v", v.Origin, chunks[0].Seq, dst.m.Self(), ok, err)
		}
	}
}

// TestConvergence runs 2 to 7 replicas writing concurrently and exchanging
// deltas over a network that drops, duplicates, reorders and batches them,
// with occasional anti-entropy rounds. At every step each replica holds, for
// each origin, exactly the owner's state at some seq (so nothing removed
// reappears) and its change feed agrees with Range; after a final
// anti-entropy round every replica equals the reference histories.
func TestConvergence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 7).Draw(t, "replicas")
		cfg := Config{
			LogMaxDeltas: rapid.IntRange(1, 8).Draw(t, "logDeltas"),
			LogMaxBytes:  rapid.SampledFrom([]int{100, 400, 1 << 20}).Draw(t, "logBytes"),
		}
		chunkBytes := rapid.SampledFrom([]int{0, 1, 30, 200}).Draw(t, "chunkBytes")
		reps := make([]*replica, n)
		hists := make([]*history, n)
		for i := range reps {
			o := Origin{Name: fmt.Sprintf("r%d", i), Epoch: uint64(100 + i)}
			reps[i] = newReplica(o, cfg, t.Fatalf)
			hists[i] = newHistory(o)
		}
		keys := rapid.SampledFrom([]string{"k0", "k1", "k2", "k3"})
		var net []message
		steps := rapid.IntRange(1, 120).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 6).Draw(t, "action") {
			case 0, 1, 2: // a local write, broadcast (sometimes batched)
				i := rapid.IntRange(0, n-1).Draw(t, "writer")
				k := keys.Draw(t, "key")
				var d Delta
				if rapid.IntRange(0, 2).Draw(t, "remove") == 0 {
					var ok bool
					if d, ok = reps[i].m.Remove(k); !ok {
						continue
					}
				} else {
					var err error
					if d, err = reps[i].m.Put(k, fmt.Appendf(nil, "%d.%d", i, len(hists[i].deltas)+1)); err != nil {
						t.Fatalf("put: %v", err)
					}
				}
				hists[i].record(d)
				for j := range reps {
					if j == i {
						continue
					}
					if last := lastTo(net, j, d.Origin); last >= 0 && net[last].d.To == d.From && rapid.Bool().Draw(t, "batch") {
						merged, err := MergeDeltas(net[last].d, d)
						if err != nil {
							t.Fatalf("batching: %v", err)
						}
						net[last].d = merged
						continue
					}
					net = append(net, message{to: j, d: d})
				}
			case 3, 4: // deliver any message, maybe keeping a duplicate
				if len(net) == 0 {
					continue
				}
				k := rapid.IntRange(0, len(net)-1).Draw(t, "deliver")
				msg := net[k]
				if !rapid.Bool().Draw(t, "duplicate") {
					net = slices.Delete(net, k, k+1)
				}
				if _, err := reps[msg.to].m.Apply(msg.d); err != nil {
					t.Fatalf("apply %s at %s: %v", formatDelta(msg.d), reps[msg.to].m.Self(), err)
				}
			case 5: // lose a message
				if len(net) > 0 {
					k := rapid.IntRange(0, len(net)-1).Draw(t, "drop")
					net = slices.Delete(net, k, k+1)
				}
			case 6: // anti-entropy between two replicas
				i := rapid.IntRange(0, n-1).Draw(t, "dst")
				j := rapid.IntRange(0, n-1).Draw(t, "src")
				if i != j {
					pull(t, reps[i], reps[j], chunkBytes)
				}
			}
			for _, r := range reps {
				for _, h := range hists {
					checkPrefix(t, r.m, h)
				}
				r.checkView()
			}
		}
		// One full anti-entropy round: everyone pulls from everyone.
		for i := range reps {
			for j := range reps {
				if i != j {
					pull(t, reps[i], reps[j], chunkBytes)
				}
			}
		}
		want := nonZero(reps[0].m.Digest())
		for _, r := range reps {
			if got := nonZero(r.m.Digest()); !slices.Equal(got, want) {
				t.Fatalf("digests differ: %s has %v, %s has %v", r.m.Self(), got, reps[0].m.Self(), want)
			}
			for _, h := range hists {
				got, seq, _ := partitionState(r.m, h.origin)
				if seq != uint64(len(h.deltas)) || !equalStates(got, h.states[seq]) {
					t.Fatalf("%s holds %s at %d: %v, want %d: %v", r.m.Self(), h.origin, seq, got, len(h.deltas), h.states[len(h.deltas)])
				}
			}
			r.checkView()
		}
	})
}

// lastTo finds the last queued message to j for origin o.
func lastTo(net []message, j int, o Origin) int {
	for k := len(net) - 1; k >= 0; k-- {
		if net[k].to == j && net[k].d.Origin == o {
			return k
		}
	}
	return -1
}

// nonZero drops origins held at seq 0, which carry no information.
func nonZero(vs []Version) []Version {
	return slices.DeleteFunc(vs, func(v Version) bool { return v.Seq == 0 })
}
