package swarm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/seal"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

// A serial's block and bit name it again, and a block's value reads back
// as written.
func TestSerialsSplitIntoBlocksAndBack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		var k revKey
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		b, i := splitSerial(k)
		if i >= blockBits || b.serial(i) != k {
			t.Fatalf("serial %x: block %x bit %d names %x", k, b, i, b.serial(i))
		}
		got, ok := parseBlockKey(b.regKey())
		if !ok || got != b {
			t.Fatalf("block key %q reads as %x (%v)", b.regKey(), got, ok)
		}
	}
	var blk revBlock
	blk.at = time.Now().UnixNano()
	want := map[uint]bool{0: true, 63: true, 64: true, 300: true, blockBits - 1: true}
	for i := range want {
		blk.bits.set(i)
	}
	back, ok := decodeBlock(blk.encode())
	if !ok || back != blk || back.bits.count() != len(want) {
		t.Fatalf("block %+v reads back as %+v (%v)", blk, back, ok)
	}
	back.bits.each(func(i uint) {
		if !want[i] {
			t.Fatalf("bit %d read back, never set", i)
		}
		delete(want, i)
	})
	if len(want) != 0 {
		t.Fatalf("bits %v not read back", want)
	}
	for _, bad := range [][]byte{nil, make([]byte, blockValueLen-1), make([]byte, blockValueLen+1)} {
		if _, ok := decodeBlock(bad); ok {
			t.Fatalf("a %d-byte value read as a block", len(bad))
		}
	}
	for _, key := range []string{"rb:", "rb:AAAA", "r:AAAAAAAAAAAAAAAA", "s2.AAAAAAAAAAAAAAAA", "rb:!!!!!!!!!!!!!!!!"} {
		if _, ok := parseBlockKey(key); ok {
			t.Fatalf("%q read as a block key", key)
		}
	}
}

// serialSwarm returns a swarm that reads the serials of ids sealed by the
// returned sealers (one per node of a cluster sharing a session key).
func serialSwarm(t *testing.T, nodes int) (*Swarm, []*seal.SessionIDs) {
	t.Helper()
	key := make([]byte, 32)
	read, err := seal.SerialReader(key)
	if err != nil {
		t.Fatal(err)
	}
	var sealers []*seal.SessionIDs
	for n := range nodes {
		s, err := seal.NewSessionIDs(key, string(rune('a'+n)))
		if err != nil {
			t.Fatal(err)
		}
		sealers = append(sealers, s)
	}
	return &Swarm{connMaxAge: 7 * 24 * time.Hour, idSerial: read}, sealers
}

// Revocations of ids a node minted in a row share blocks: a thousand are
// two registry entries of 72 bytes, not a thousand of 26, and each id
// reads as revoked, its neighbours not.
func TestSerialRevocationsShareBlocks(t *testing.T) {
	sw, sealers := serialSwarm(t, 1)
	c := newConnsState(sw)
	var ids []string
	for range 1000 {
		ids = append(ids, sealers[0].Mint("alice"))
	}
	spare := sealers[0].Mint("alice")
	now := time.Now().UnixNano()
	for _, id := range ids {
		c.mu.Lock()
		c.mine[id] = connRecord{Info: mcpfront.ConnInfo{ID: id}}
		c.indexLocked(id, "alice")
		c.endLocked(id, now, false)
		c.mu.Unlock()
	}
	if len(c.endedBlocks) != 2 || c.endedSerials != 1000 || c.ended.len() != 0 {
		t.Fatalf("%d blocks holding %d serials, %d digests; want 2 blocks of 1,000 serials, no digest",
			len(c.endedBlocks), c.endedSerials, c.ended.len())
	}
	for _, id := range ids {
		if !c.Revoked(id) {
			t.Fatalf("%s is not revoked", id)
		}
	}
	if c.Revoked(spare) {
		t.Fatal("the next id, never ended, reads as revoked")
	}
	if len(c.ids) != 0 || len(c.digests) != 0 || len(c.byPrincipal) != 0 {
		t.Fatal("ended ids left in the index")
	}
	entries := 0
	for key := range c.dirty {
		b, ok := parseBlockKey(key)
		if !ok {
			continue
		}
		entries++
		c.mu.Lock()
		v, own, err := c.ownEntryLocked(key)
		c.mu.Unlock()
		blk, valid := decodeBlock(v)
		if !own || err != nil || !valid || blk != *c.endedBlocks[b] {
			t.Fatalf("block %x publishes %x (own %v, %v)", b, v, own, err)
		}
	}
	if entries != 2 {
		t.Fatalf("%d block entries to publish; want 2", entries)
	}
}

// Another node's block revokes its serials here, and the front forgets
// the ids it held; when that block leaves its partition while its ids are
// still valid, this node keeps its revocations in its own block, unless
// they expired or a floor covers them.
func TestAnotherNodesBlockRevokesHereAndOutlivesItsHolder(t *testing.T) {
	sw, sealers := serialSwarm(t, 2)
	front := &forgetFront{}
	sw.Attach(front)
	c := newConnsState(sw)
	other := crdt.Origin{Name: "b", Epoch: 1}
	live := sealers[1].Mint("alice")
	ended := sealers[1].Mint("alice")
	c.mu.Lock()
	c.others[live] = map[crdt.Origin]connRecord{other: {Info: mcpfront.ConnInfo{ID: live, Node: "b"}}}
	c.indexLocked(live, "alice")
	c.mu.Unlock()

	k, serial := c.keyOf(live)
	kEnded, _ := c.keyOf(ended)
	if !serial {
		t.Fatal("a serial id is keyed by digest")
	}
	b, i := splitSerial(k)
	_, j := splitSerial(kEnded)
	held := revBlock{at: time.Now().UnixNano()}
	held.bits.set(j)
	c.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, New: held.encode()})
	if !c.Revoked(ended) || c.Revoked(live) || len(front.forgot) != 0 {
		t.Fatalf("after the first revocation: ended %v, live %v, forgot %v", c.Revoked(ended), c.Revoked(live), front.forgot)
	}
	grown := held
	grown.bits.set(i)
	c.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, Old: held.encode(), New: grown.encode()})
	if !c.Revoked(live) || len(front.forgot) != 1 || front.forgot[0] != live {
		t.Fatalf("the live id's revocation: revoked %v, the front forgot %v", c.Revoked(live), front.forgot)
	}
	if _, ok := c.Get(live); ok {
		t.Fatal("a revoked connection still reads")
	}
	if len(c.endedBlocks) != 0 {
		t.Fatal("another node's revocations were copied while it holds them")
	}

	// The holder's partition goes: the block becomes this node's.
	c.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, Old: grown.encode()})
	if got := c.endedBlocks[b]; got == nil || got.bits != grown.bits || got.at != grown.at || !c.dirty[b.regKey()] {
		t.Fatalf("the lost block kept as %+v (published %v); want %+v", got, c.dirty[b.regKey()], grown)
	}
	if !c.Revoked(live) || !c.Revoked(ended) || len(c.elsewhereBlocks) != 0 {
		t.Fatal("the lost block's revocations read wrong")
	}

	// Expired, or under a floor: not kept.
	for name, lost := range map[string]revBlock{
		"expired":     {at: time.Now().Add(-7 * 24 * time.Hour).UnixNano()},
		"under floor": {at: time.Now().Add(-time.Hour).UnixNano()},
	} {
		c2 := newConnsState(sw)
		c2.floors[other] = time.Now().Add(-time.Minute).UnixNano()
		lost.bits.set(i)
		c2.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, New: lost.encode()})
		c2.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, Old: lost.encode()})
		if len(c2.endedBlocks) != 0 || c2.Revoked(live) {
			t.Fatalf("%s: a lost block was kept", name)
		}
	}
}

// onChangeForTest feeds a change as the registry would, from another
// origin than this node's own.
func (c *Conns) onChangeForTest(ch crdt.Change) {
	if b, ok := parseBlockKey(ch.Key); ok {
		c.blockChanged(b, ch)
		return
	}
	panic("onChangeForTest: not a block key")
}

// A node holds at most maxRevocations serials and a quarter as many
// blocks; beyond either, its oldest blocks give way to a floor, and a
// block expires whole with its newest revocation.
func TestSerialRevocationsBeyondTheBoundGiveWayToAFloor(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	sw, _ := serialSwarm(t, 0)
	// Blocks: every sealer a new epoch, so each id its own block.
	key := make([]byte, 32)
	mint := func() string {
		s, err := seal.NewSessionIDs(key, "n")
		if err != nil {
			t.Fatal(err)
		}
		return s.Mint("")
	}
	c := newConnsState(sw)
	c.maxRevocations = 12 // at most 3 blocks
	var ids []string
	for i := range 4 {
		ids = append(ids, mint())
		c.mu.Lock()
		c.endLocked(ids[i], t0.Add(time.Duration(i)*time.Second+time.Millisecond).UnixNano(), false)
		c.mu.Unlock()
	}
	// The 4th block trimmed the oldest to keep 2 (3*9/10): the floor is at
	// the second of ids[1].
	if len(c.endedBlocks) != 2 || c.endedSerials != 2 {
		t.Fatalf("%d blocks, %d serials kept; want 2 and 2", len(c.endedBlocks), c.endedSerials)
	}
	if want := t0.Add(time.Second).UnixNano(); c.floor != want || !c.dirty[floorKey] {
		t.Fatalf("floor %v; want %v", time.Unix(0, c.floor), time.Unix(0, want))
	}
	for _, id := range ids[:2] {
		k, _ := c.keyOf(id)
		b, _ := splitSerial(k)
		if c.endedBlocks[b] != nil || !c.dirty[b.regKey()] {
			t.Fatalf("a trimmed block is kept, or its removal not published")
		}
	}

	// Serials: one sealer's ids fill one block; 13 of them pass the bound.
	s, err := seal.NewSessionIDs(key, "n")
	if err != nil {
		t.Fatal(err)
	}
	c = newConnsState(sw)
	c.maxRevocations = 12
	for i := range 13 {
		c.mu.Lock()
		c.endLocked(s.Mint(""), t0.Add(time.Duration(i)*time.Second).UnixNano(), false)
		c.mu.Unlock()
	}
	if c.endedSerials != 0 || len(c.endedBlocks) != 0 || c.floor != t0.Add(12*time.Second).UnixNano() {
		t.Fatalf("a full block past the bound: %d serials in %d blocks kept, floor %v", c.endedSerials, len(c.endedBlocks), time.Unix(0, c.floor))
	}

	// Expiry: a block goes once its newest revocation is older than the
	// ids' maximum age.
	c = newConnsState(sw)
	id := s.Mint("")
	c.mu.Lock()
	c.endLocked(id, t0.UnixNano(), false)
	c.mu.Unlock()
	k, _ := c.keyOf(id)
	b, _ := splitSerial(k)
	var removed []string
	c.sweepWith(t0.Add(time.Hour), 2*time.Hour, func(k string) error { removed = append(removed, k); return nil })
	if len(c.endedBlocks) != 1 || len(removed) != 0 {
		t.Fatal("a block swept before its time")
	}
	c.sweepWith(t0.Add(3*time.Hour), 2*time.Hour, func(k string) error { removed = append(removed, k); return nil })
	if len(c.endedBlocks) != 0 || c.endedSerials != 0 || len(removed) != 1 || removed[0] != b.regKey() {
		t.Fatalf("after the ids' maximum age: %d blocks left, removed %v", len(c.endedBlocks), removed)
	}
}

// Random revocations of three nodes' ids, here and elsewhere, with blocks
// lost and taken over, read exactly as a set of ended ids does.
func TestSerialRevocationsAnswerAsASet(t *testing.T) {
	sw, sealers := serialSwarm(t, 3)
	for seed := range uint64(10) {
		r := rand.New(rand.NewPCG(seed, 7))
		c := newConnsState(sw)
		other := crdt.Origin{Name: "x", Epoch: 1}
		theirs := map[blockID]revBlock{}
		var ids []string
		model := map[string]bool{}
		for range 3000 {
			switch op := r.IntN(10); {
			case op < 4 || len(ids) == 0:
				ids = append(ids, sealers[r.IntN(3)].Mint(""))
			case op < 7:
				id := ids[r.IntN(len(ids))]
				c.mu.Lock()
				if !c.revokedLocked(id) {
					c.endLocked(id, time.Now().UnixNano(), false)
				}
				c.mu.Unlock()
				model[id] = true
			case op < 9:
				id := ids[r.IntN(len(ids))]
				k, _ := c.keyOf(id)
				b, i := splitSerial(k)
				old, had := theirs[b]
				blk := old
				blk.at = time.Now().UnixNano()
				blk.bits.set(i)
				theirs[b] = blk
				ch := crdt.Change{Key: b.regKey(), Origin: other, New: blk.encode()}
				if had {
					ch.Old = old.encode()
				}
				c.onChangeForTest(ch)
				model[id] = true
			default:
				for b, blk := range theirs { // the other node's partition loses one block
					c.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, Old: blk.encode()})
					delete(theirs, b)
					break
				}
			}
		}
		for _, id := range ids {
			if c.Revoked(id) != model[id] {
				t.Fatalf("seed %d: %s revoked %v, want %v", seed, id, c.Revoked(id), model[id])
			}
		}
		n := 0
		for _, blk := range c.endedBlocks {
			n += blk.bits.count()
		}
		if n != c.endedSerials {
			t.Fatalf("seed %d: endedSerials %d, blocks hold %d", seed, c.endedSerials, n)
		}
	}
}

// A node lets its front mint serial ids only while every live peer reads
// them (cluster.CapSerialIDs): a previous version, during a rolling
// upgrade, would refuse them. A node that reads no serials mints none.
func TestSerialIDsWaitForEveryLivePeer(t *testing.T) {
	read, err := seal.SerialReader(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		oldPeer bool
		want    bool
	}{
		{"every peer reads serial ids", false, true},
		{"a previous-version peer", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, nodes := startContractWith(t, 2, secondNodeLacks(tc.oldPeer, cluster.CapSerialIDs))
			a := nodes[0].sw
			if a.Conns().MintSerial() {
				t.Fatal("a node that reads no serials would mint them")
			}
			a.idSerial = read
			if got := a.Conns().MintSerial(); got != tc.want {
				t.Fatalf("MintSerial = %v; want %v", got, tc.want)
			}
		})
	}
}

// A block change that adds no serial (its holder only moved its time) and a
// lost block holding nothing this node lacks leave no empty entries behind.
func TestBlockChangesWithoutNewSerialsKeepNothing(t *testing.T) {
	sw, _ := serialSwarm(t, 0)
	c := newConnsState(sw)
	other := crdt.Origin{Name: "b", Epoch: 1}
	var b blockID
	empty := revBlock{at: time.Now().UnixNano()}
	c.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, New: empty.encode()})
	c.onChangeForTest(crdt.Change{Key: b.regKey(), Origin: other, Old: empty.encode()})
	if len(c.elsewhereBlocks) != 0 || len(c.endedBlocks) != 0 || len(c.dirty) != 0 {
		t.Fatalf("empty blocks kept: elsewhere %d, own %d, dirty %v", len(c.elsewhereBlocks), len(c.endedBlocks), c.dirty)
	}
}
