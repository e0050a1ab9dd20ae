package swarm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
)

// revKey names a revocation: the first 12 bytes of the SHA-256 of the
// connection id. A revocation is kept on every node for the id's maximum
// age (7 days by default), one per ended connection, so its size is what
// a node's memory grows by under churn: the sealed id is about 105 bytes,
// its digest 12 (issue #13's soak: ≈ 1.4 KiB per ended connection per
// node with the id as key and a JSON value; see docs/ARCHITECTURE.md).
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
	rest, ok := strings.CutPrefix(key, revPrefix)
	var k revKey
	if !ok || base64.RawURLEncoding.DecodedLen(len(rest)) != len(k) {
		return k, false
	}
	n, err := base64.RawURLEncoding.Decode(k[:], []byte(rest))
	return k, err == nil && n == len(k)
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
// holds more than maxRevocations.
func (c *Conns) trimLocked() {
	if c.ended.len() <= c.maxRevocations {
		return
	}
	times := make([]int64, 0, c.ended.len())
	for _, at := range c.ended.all() {
		times = append(times, at.nanos())
	}
	slices.Sort(times)
	// Ids' issue times are whole seconds, and an id was issued no later
	// than its revocation: a floor at the second of the newest revocation
	// trimmed covers every revocation made within that second or before.
	floor := time.Unix(0, times[len(times)-c.maxRevocations*9/10-1]).Truncate(time.Second)
	covered := floor.Add(time.Second).UnixNano() - 1
	c.ended.removeIf(func(k revKey, at revTime) bool {
		if at.nanos() > covered {
			return false
		}
		c.dirty[k.regKey()] = true
		return true
	})
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

// RevokedBefore implements mcp.RevocationFloor: ids issued at or before it
// count as revoked (zero time: none).
func (c *Conns) RevokedBefore() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.floorLocked(); f != 0 {
		return time.Unix(0, f)
	}
	return time.Time{}
}
