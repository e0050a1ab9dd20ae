package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

// A DELETE is kept as the id's digest and time under a revocation key,
// and the live record under the id goes. While a live peer runs a version
// that reads only the previous form (it does not advertise
// cluster.CapRevocationKeys), the revoker also writes that form — a
// revoked record under the id — so the old peer refuses the id as soon as
// the DELETE is answered; with no such peer, it writes only the key.
func TestRevocationIsWrittenInTheFormEveryLivePeerReads(t *testing.T) {
	for _, tc := range []struct {
		name       string
		oldPeer    bool
		wantLegacy bool
	}{
		{"every peer reads revocation keys", false, false},
		{"a previous-version peer", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, nodes := startContractWith(t, 2, secondNodeLacks(tc.oldPeer, cluster.CapRevocationKeys))
			a, b := nodes[0], nodes[1]
			id := "s1.connection-ended-on-n1"
			a.sw.Conns().Put(mcpfront.ConnInfo{ID: id, Node: a.name, Principal: "alice", ProtocolVersion: "2025-11-25"})
			if _, ok := b.sw.Conns().Get(id); !ok {
				t.Fatal("n2 does not know the connection once initialize was answered")
			}
			a.sw.Conns().Delete(id)

			// What n2 holds of n1's partition once the DELETE was answered.
			origin := a.cl.Origin()
			k := revocationOf(id)
			rev, ok := b.sw.conns.reg.Get(origin, k.regKey())
			if at, valid := decodeRevocation(rev.Value); !ok || !valid || at == 0 {
				t.Fatalf("n2 holds no revocation key from n1 (%v, %q)", ok, rev.Value)
			}
			old, ok := b.sw.conns.reg.Get(origin, id)
			var r connRecord
			legacy := ok && json.Unmarshal(old.Value, &r) == nil && r.Revoked && r.Info.ID == ""
			if legacy != tc.wantLegacy || (ok && !legacy) {
				t.Fatalf("n2 holds under the id %q (present %v); want a revoked record: %v", old.Value, ok, tc.wantLegacy)
			}
			if !b.sw.Conns().Revoked(id) || !a.sw.Conns().Revoked(id) {
				t.Fatal("a node does not refuse the revoked id")
			}
		})
	}
}

// secondNodeLacks configures the second node of a contract cluster as a
// previous version that does not advertise capability name, when old.
func secondNodeLacks(old bool, name string) func(int, *cluster.Config) {
	return func(i int, cfg *cluster.Config) {
		if i == 1 && old {
			cfg.Capabilities = slices.DeleteFunc(cluster.DefaultCapabilities(), func(c string) bool { return c == name })
		}
	}
}

// forgetFront records the connections the swarm tells the front to forget.
type forgetFront struct{ forgot []string }

func (f *forgetFront) HoldsStream(string) bool { return false }
func (f *forgetFront) DeliverResponse(context.Context, string, []byte) (int, error) {
	return 0, nil
}
func (f *forgetFront) DeliverSSE(context.Context, string, []byte) (int, error) { return 0, nil }
func (f *forgetFront) Forget(id string)                                        { f.forgot = append(f.forgot, id) }

// The home node drops its live record when it learns of a revocation made
// elsewhere, and that removal may reach a third node before the revocation
// does: the revocation, known only by digest, must still make the front
// forget the connection (mcp-go keeps per-id state here for 30 minutes).
// An id whose records went and no revocation came is forgotten after a
// minute or two.
func TestARevocationArrivingAfterTheLastRecordWentStillReachesTheFront(t *testing.T) {
	sw := &Swarm{connMaxAge: time.Hour}
	front := &forgetFront{}
	sw.Attach(front)
	c := newConnsState(sw)
	home := crdt.Origin{Name: "home", Epoch: 1}
	for _, id := range []string{"s1.ended", "s1.crashed"} {
		c.others[id] = map[crdt.Origin]connRecord{home: {Info: mcpfront.ConnInfo{ID: id, Node: "home"}}}
		c.indexLocked(id, "")
		c.dropOtherLocked(id, home) // the home node's removal arrives first
	}
	if len(c.ids) != 0 || len(c.others) != 0 {
		t.Fatalf("records or index left after the removals: %v, %v", c.others, c.ids)
	}
	c.revokedElsewhere(revocationOf("s1.ended"))
	if len(front.forgot) != 1 || front.forgot[0] != "s1.ended" {
		t.Fatalf("the front was told to forget %v; want [s1.ended]", front.forgot)
	}
	if !c.Revoked("s1.ended") || c.Revoked("s1.crashed") {
		t.Fatal("revocations read wrong")
	}
	c.sweepWith(time.Now().Add(goneFor+time.Second), time.Hour, func(string) error { return nil })
	if len(c.gone) != 0 {
		t.Fatalf("ids without records or revocation kept after %v: %v", goneFor, c.gone)
	}
}

// Beyond MaxRevocations a node's oldest revocations give way to a floor:
// ids issued in or before the second of the newest one trimmed count as
// revoked. The floor is published before the trimmed revocations are
// removed, no node copies a revocation the floor covers, and one taken
// over from a node that went (as lostRevocation does for revocations).
func TestRevocationsBeyondTheBoundGiveWayToAFloor(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	c := newConnsState(&Swarm{connMaxAge: 7 * 24 * time.Hour})
	c.maxRevocations = 10
	for i := range 12 {
		c.endLocked(fmt.Sprintf("s1.c%02d", i), t0.Add(time.Duration(i)*time.Second+time.Millisecond).UnixNano(), false)
	}
	// At the 11th, the oldest trimmed to keep 9 (c00, c01), the floor at
	// the second of c01; the 12th fits.
	if c.ended.len() != 10 {
		t.Fatalf("%d revocations kept; want 10", c.ended.len())
	}
	wantFloor := t0.Add(time.Second).UnixNano()
	if c.floor != wantFloor || !c.dirty[floorKey] {
		t.Fatalf("floor %v (published %v); want %v", time.Unix(0, c.floor), c.dirty[floorKey], time.Unix(0, wantFloor))
	}
	for i := range 2 {
		k := revocationOf(fmt.Sprintf("s1.c%02d", i))
		if c.ended.has(k) || !c.dirty[k.regKey()] {
			t.Fatalf("c%02d: kept %v, its removal published %v", i, c.ended.has(k), c.dirty[k.regKey()])
		}
	}
	c.mu.Lock()
	v, own, _ := c.ownEntryLocked(floorKey)
	c.mu.Unlock()
	if at, ok := decodeRevocation(v); !own || !ok || at != wantFloor {
		t.Fatalf("the floor's entry %x (own %v)", v, own)
	}
	if got := c.RevokedBefore(); !got.Equal(time.Unix(0, wantFloor)) {
		t.Fatalf("RevokedBefore = %v", got)
	}

	// Another node trims the same way: its floor holds here, and the
	// revocations it removes under it are not taken over.
	other := crdt.Origin{Name: "n2", Epoch: 1}
	later := t0.Add(20 * time.Second).UnixNano()
	c.floorChanged(crdt.Change{Key: floorKey, Origin: other, New: encodeRevocation(later)})
	if got := c.RevokedBefore(); !got.Equal(time.Unix(0, later)) {
		t.Fatalf("RevokedBefore = %v; want n2's floor %v", got, time.Unix(0, later))
	}
	trimmed := revocationOf("s1.n2-old")
	c.elsewhere.put(trimmed, struct{}{})
	c.lostRevocation(trimmed, later-int64(time.Second))
	if c.ended.has(trimmed) {
		t.Fatal("a revocation removed under its holder's floor was taken over")
	}
	// n2 goes: its floor becomes this node's.
	c.floorChanged(crdt.Change{Key: floorKey, Origin: other, Old: encodeRevocation(later)})
	if c.floor != later || !c.RevokedBefore().Equal(time.Unix(0, later)) {
		t.Fatalf("after n2 went: floor %v", time.Unix(0, c.floor))
	}
	// Expired with the ids it covered.
	var removed []string
	c.sweepWith(time.Unix(0, later).Add(7*24*time.Hour+time.Second), 7*24*time.Hour, func(k string) error { removed = append(removed, k); return nil })
	if c.floor != 0 || !slices.Contains(removed, floorKey) {
		t.Fatalf("after the ids' maximum age: floor %v, removed %v", c.floor, removed)
	}
}
