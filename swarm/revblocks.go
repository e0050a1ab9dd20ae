package swarm

import (
	"encoding/base64"
	"encoding/binary"
	"math/bits"
)

// Serial ids (seal.SessionIDs.Serial) are revoked in blocks. A node
// numbers the ids it mints in order within a random epoch, and most
// connections end, so the revocations of a node's ids fill runs of
// neighbouring serials: a block holds 512 of them as a bitmap and the time
// of its newest revocation. Where a digest cost every node about 55 bytes
// per ended connection for the ids' maximum age (issue #13's soak: 1.5 MB
// a node for 28,000 cycles, what kept its RSS above the bound), a full
// block costs about a third of a byte per revocation in the registry and
// as much in memory.

// blockBits is how many serials a block covers.
const blockBits = 512

// blockID names a block: the serials' epoch (8 bytes) and their sequence
// number divided by blockBits (4).
type blockID [12]byte

// revBits is a block's bitmap: bit i is the serial blockBits*n+i.
type revBits [blockBits / 64]uint64

func (b *revBits) has(i uint) bool { return b[i/64]&(1<<(i%64)) != 0 }

func (b *revBits) set(i uint) { b[i/64] |= 1 << (i % 64) }

// count returns how many serials the bitmap holds.
func (b *revBits) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// andNot returns the serials in b and not in o.
func (b revBits) andNot(o *revBits) revBits {
	for i := range b {
		b[i] &^= o[i]
	}
	return b
}

// or adds o's serials to b.
func (b *revBits) or(o *revBits) {
	for i := range b {
		b[i] |= o[i]
	}
}

// each calls fn with every bit set in b.
func (b *revBits) each(fn func(i uint)) {
	for w, word := range b {
		for word != 0 {
			i := uint(bits.TrailingZeros64(word))
			fn(uint(w)*64 + i)
			word &^= 1 << i
		}
	}
}

// splitSerial returns the block of serial k and its bit there.
func splitSerial(k revKey) (blockID, uint) {
	seq := binary.BigEndian.Uint32(k[8:])
	var b blockID
	copy(b[:8], k[:8])
	binary.BigEndian.PutUint32(b[8:], seq/blockBits)
	return b, uint(seq % blockBits)
}

// serial returns the serial of bit i of block b.
func (b blockID) serial(i uint) revKey {
	var k revKey
	copy(k[:8], b[:8])
	binary.BigEndian.PutUint32(k[8:], binary.BigEndian.Uint32(b[8:])*blockBits+uint32(i))
	return k
}

// blockPrefix starts a block's key in the "conns" registry (not a sealed
// id's "s1."/"s2.", nor a digest's "r:").
const blockPrefix = "rb:"

// regKey is the block's key in its holder's partition.
func (b blockID) regKey() string {
	return blockPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// parseBlockKey reads a registry key written by regKey.
func parseBlockKey(key string) (blockID, bool) {
	var b blockID
	return b, parseKey(key, blockPrefix, b[:])
}

// revBlock is one node's revocations in a block: the bitmap and when the
// newest of them was made (unix nanoseconds). Every id in it was issued
// no later, so the whole block expires with its newest revocation.
type revBlock struct {
	at   int64
	bits revBits
}

// blockValueLen is an encoded block's size: its time and its bitmap.
const blockValueLen = 8 + blockBits/8

// encode writes the block's registry value: its time, then its bitmap's
// words, big-endian.
func (r *revBlock) encode() []byte {
	out := make([]byte, 0, blockValueLen)
	out = binary.BigEndian.AppendUint64(out, uint64(r.at))
	for _, w := range r.bits {
		out = binary.BigEndian.AppendUint64(out, w)
	}
	return out
}

// decodeBlock reads a value written by encode.
func decodeBlock(b []byte) (revBlock, bool) {
	var r revBlock
	if len(b) != blockValueLen {
		return r, false
	}
	r.at = int64(binary.BigEndian.Uint64(b))
	for i := range r.bits {
		r.bits[i] = binary.BigEndian.Uint64(b[8+8*i:])
	}
	return r, true
}
