package swarm

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/seal"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
)

// revKey names a revocation: the first 12 bytes of the SHA-256 of the
// connection id. A revocation is kept on every node for the id's maximum
// age (7 days by default), one per ended connection, so its size is what
// a node's memory grows by under churn: the sealed id is about 105 bytes,
// its digest 12 (issue #13's soak: ≈ 1.4 KiB per ended connection per
// node with the id as key and a JSON value; see docs/bench/HISTORY.md, "Soak").
// With 12 bytes, two of a billion ids share a digest with probability
// below 2⁻³⁶, and the only harm would be a live id refused (its client
// initializes again): nobody can aim a collision at an id they never saw.
type revKey [12]byte

// revocationOf returns the key of id's revocation.
func revocationOf(id string) revKey {
	sum := sha256.Sum256([]byte(id))
	return revKey(sum[:12])
}

// revPrefix starts a revocation's key in the "conns" registry. Connection
// ids are sealed ("s1." + base64url), so no live record's key starts with
// it.
const revPrefix = "r:"

// regKey is the revocation's key in the "conns" registry.
func (k revKey) regKey() string {
	return revPrefix + base64.RawURLEncoding.EncodeToString(k[:])
}

// parseRevKey reads a registry key written by regKey.
func parseRevKey(key string) (revKey, bool) {
	var k revKey
	return k, parseKey(key, revPrefix, k[:])
}

// parseKey reads a registry key of prefix and len(dst) bytes in base64url
// into dst.
func parseKey(key, prefix string, dst []byte) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || base64.RawURLEncoding.DecodedLen(len(rest)) != len(dst) {
		return false
	}
	n, err := base64.RawURLEncoding.Decode(dst, []byte(rest))
	return err == nil && n == len(dst)
}

// A revocation's value is when it was made: 8 bytes, big-endian unix
// nanoseconds. Nothing else: refusing an id needs only its digest, and
// expiring the revocation only its age.
func encodeRevocation(at int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(at)) }

func decodeRevocation(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// peerLacks reports whether a live peer (alive, suspect or draining) does
// not advertise capability name: a node of a previous version, during a
// rolling upgrade.
func (s *Swarm) peerLacks(name string) bool {
	for _, m := range s.cl.Members() {
		if !m.Self && m.State <= cluster.StateDraining && !m.Capabilities.Has(name) {
			return true
		}
	}
	return false
}

// DefaultMaxRevocations is how many revocations a node holds in its own
// partition before its oldest give way to a floor: with three nodes, about
// 170 MiB of every node's memory at the bound (≈ 55 bytes a revocation
// on every node: its registry entry and table slot, ≈ 40, and its packed
// record in Conns, 14 or 21; BenchmarkRevocationMemory).
const DefaultMaxRevocations = 1 << 20

// floorKey is the key of a node's revocation floor in its "conns"
// partition; its value is a time, encoded as a revocation's.
const floorKey = "floor"

// Revocations live for the ids' maximum age (7 days), so under sustained
// churn their number is the rate of ended connections times that age, with
// no bound of its own: a client that initializes and DELETEs in a loop
// would grow every node's memory for a week. So a node keeps at most
// maxRevocations; beyond it, its oldest tenth or so are replaced by a
// floor: every id issued in or before the second of the newest of them
// counts as revoked (its
// client gets 404 and initializes again, as after any expiry). The floor
// is written before those revocations are removed, so no node copies them
// back (lostRevocation) nor serves an id they covered.

// trimLocked replaces this node's oldest revocations by its floor when it
// holds more than maxRevocations, or more than a quarter as many blocks
// (a block of one serial costs about what four digests do).
func (c *Conns) trimLocked() {
	held, maxBlocks := c.ended.len()+c.endedSerials, max(c.maxRevocations/4, 1)
	if held <= c.maxRevocations && len(c.endedBlocks) <= maxBlocks {
		return
	}
	// A unit is a digest or a block: what goes as a whole, with its time.
	type unit struct {
		at       int64
		n, block int
	}
	units := make([]unit, 0, c.ended.len()+len(c.endedBlocks))
	for _, at := range c.ended.all() {
		units = append(units, unit{at: at.nanos(), n: 1})
	}
	for _, blk := range c.endedBlocks {
		units = append(units, unit{at: blk.at, n: blk.bits.count(), block: 1})
	}
	slices.SortFunc(units, func(a, b unit) int { return cmp.Compare(a.at, b.at) })
	// The oldest go until a tenth of both bounds is free.
	i, blocks := 0, len(c.endedBlocks)
	for i < len(units) && (held > c.maxRevocations*9/10 || blocks > maxBlocks*9/10) {
		held, blocks = held-units[i].n, blocks-units[i].block
		i++
	}
	// Ids' issue times are whole seconds, and an id was issued no later
	// than its revocation: a floor at the second of the newest revocation
	// trimmed covers every revocation made within that second or before.
	floor := time.Unix(0, units[i-1].at).Truncate(time.Second)
	covered := floor.Add(time.Second).UnixNano() - 1
	c.ended.removeIf(func(k revKey, at revTime) bool {
		if at.nanos() > covered {
			return false
		}
		c.dirty[k.regKey()] = true
		return true
	})
	for b, blk := range c.endedBlocks {
		if blk.at <= covered {
			delete(c.endedBlocks, b)
			c.endedSerials -= blk.bits.count()
			c.dirty[b.regKey()] = true
		}
	}
	if f := floor.UnixNano(); f > c.floor {
		c.floor = f
		c.dirty[floorKey] = true
	}
	c.kick.Kick()
}

// floorLocked is the cluster's revocation floor: the newest of this node's
// and every other node's.
func (c *Conns) floorLocked() int64 {
	f := c.floor
	for _, at := range c.floors {
		f = max(f, at)
	}
	return f
}

// floorChanged follows another node's floor. One that leaves its
// partition (the node died or restarted) while it still covers valid ids
// becomes this node's, as a revocation would (lostRevocation).
func (c *Conns) floorChanged(ch crdt.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := decodeRevocation(ch.New); ok {
		c.floors[ch.Origin] = at
		return
	}
	delete(c.floors, ch.Origin)
	at, ok := decodeRevocation(ch.Old)
	if !ok || at <= c.floor || time.Since(time.Unix(0, at)) > c.s.connMaxAge-revocationCopyMargin {
		return
	}
	c.floor = at
	c.dirty[floorKey] = true
	c.kick.Kick()
}

// RevokedBefore implements mcp.Revocations: ids issued at or before it
// count as revoked (zero time: none).
func (c *Conns) RevokedBefore() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.floorLocked(); f != 0 {
		return time.Unix(0, f)
	}
	return time.Time{}
}

// MintSerial implements mcp.Revocations: ids minted now may be serial ones
// when this node reads their serials and every live peer reads them too
// (cluster.CapSerialIDs): a previous version would refuse them.
func (c *Conns) MintSerial() bool {
	return c.s.idSerial != nil && !c.s.peerLacks(cluster.CapSerialIDs)
}

// serialForm reports whether id is revoked by serial, in blocks: a serial
// id, on a node that reads serials.
func (c *Conns) serialForm(id string) bool {
	return c.s != nil && c.s.idSerial != nil && strings.HasPrefix(id, seal.SerialPrefix)
}

// keyOf returns id's revocation key and whether it is a serial (kept by
// block) rather than a digest. A serial id whose serial does not read
// (nothing the cluster minted) is keyed by its digest, still by block.
func (c *Conns) keyOf(id string) (revKey, bool) {
	if !c.serialForm(id) {
		return revocationOf(id), false
	}
	if s, ok := c.s.idSerial(id); ok {
		return revKey(s), true
	}
	return revocationOf(id), true
}

// endedAtLocked returns when this node revoked the connection keyed k.
func (c *Conns) endedAtLocked(k revKey, serial bool) (int64, bool) {
	if !serial {
		at, ok := c.ended.get(k)
		return at.nanos(), ok
	}
	b, i := splitSerial(k)
	if blk := c.endedBlocks[b]; blk != nil && blk.bits.has(i) {
		return blk.at, true
	}
	return 0, false
}

// elsewhereLocked reports whether another node holds a revocation of the
// connection keyed k.
func (c *Conns) elsewhereLocked(k revKey, serial bool) bool {
	if !serial {
		return c.elsewhere.has(k)
	}
	b, i := splitSerial(k)
	bits := c.elsewhereBlocks[b]
	return bits != nil && bits.has(i)
}

// endSerialLocked adds serial k, revoked at at, to this node's block and
// returns the block's registry key.
func (c *Conns) endSerialLocked(k revKey, at int64) string {
	b, i := splitSerial(k)
	blk := c.endedBlocks[b]
	if blk == nil {
		blk = &revBlock{}
		c.endedBlocks[b] = blk
	}
	if !blk.bits.has(i) {
		blk.bits.set(i)
		c.endedSerials++
	}
	blk.at = max(blk.at, at)
	return b.regKey()
}

// blockChanged follows another node's block: serials it added are
// revoked here too, and a block that leaves its partition is kept, as a
// digest would be (lostBlock). A holder only adds to a block until it
// removes it whole (expiry, trim), so New holds all of Old.
func (c *Conns) blockChanged(b blockID, ch crdt.Change) {
	old, hadOld := decodeBlock(ch.Old)
	now, ok := decodeBlock(ch.New)
	if ok {
		c.revokedElsewhereInBlock(b, now.bits.andNot(&old.bits))
	} else if hadOld {
		c.lostBlock(b, old)
	}
}

// revokedElsewhereInBlock records revocations another node holds, the
// serials added of block b, as revokedElsewhere does a digest's.
func (c *Conns) revokedElsewhereInBlock(b blockID, added revBits) {
	if added == (revBits{}) {
		return // only its time moved (its holder took over older ones)
	}
	var forget []string
	c.mu.Lock()
	c.addElsewhereLocked(b, &added)
	added.each(func(i uint) {
		if id, known := c.endedElsewhereLocked(b.serial(i)); known {
			forget = append(forget, id)
		}
	})
	c.mu.Unlock()
	if f := c.s.front(); f != nil {
		// After the lock: the front calls back into Conns.
		for _, id := range forget {
			f.Forget(id)
		}
	}
}

// addElsewhereLocked adds serials of block b to those other nodes hold.
func (c *Conns) addElsewhereLocked(b blockID, added *revBits) {
	bits := c.elsewhereBlocks[b]
	if bits == nil {
		bits = &revBits{}
		c.elsewhereBlocks[b] = bits
	}
	bits.or(added)
}

// lostBlock keeps the revocations of a block another node held when it
// leaves that node's partition, as lostRevocation keeps a digest's: this
// node adds them to its own block, with their time.
func (c *Conns) lostBlock(b blockID, lost revBlock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bits := c.elsewhereBlocks[b]; bits != nil {
		if *bits = bits.andNot(&lost.bits); *bits == (revBits{}) {
			delete(c.elsewhereBlocks, b)
		}
	}
	if time.Since(time.Unix(0, lost.at)) > c.s.connMaxAge-revocationCopyMargin {
		return
	}
	if lost.at <= c.floorLocked() {
		return // its holder trimmed it under a floor that covers it
	}
	blk := c.endedBlocks[b]
	var held revBits
	if blk != nil {
		held = blk.bits
	}
	added := lost.bits.andNot(&held)
	if added == (revBits{}) && (blk == nil || blk.at >= lost.at) {
		return // nothing this node lacks
	}
	if blk == nil {
		blk = &revBlock{}
		c.endedBlocks[b] = blk
	}
	blk.bits.or(&added)
	c.endedSerials += added.count()
	blk.at = max(blk.at, lost.at)
	c.dirty[b.regKey()] = true
	c.trimLocked()
	c.kick.Kick()
}
