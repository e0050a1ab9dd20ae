package crdt

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"unsafe"
)

// table holds one partition's entries compactly: each entry is encoded as
// uvarint(seq) uvarint(len key) uvarint(len value) key value in an
// append-only arena, and an open-addressing hash table (linear probing,
// backward-shift deletion) maps keys to 32-bit arena references. A live entry
// costs its key and value bytes, a few header bytes and 6 to 9.5 bytes of
// table (5 bytes a slot at 53% to 80% occupancy), instead of the ~60 bytes
// of a Go map of strings to structs.
//
// Arena bytes are never modified once written, so value slices handed out by
// get and all stay valid and unchanged after later writes; compaction copies
// live entries into fresh blocks and leaves the old ones to the collector.
type table struct {
	seed  maphash.Seed
	ctrl  []uint8  // 0: empty slot; otherwise 1 + top bits of the key's hash
	slots []uint32 // arena reference of the entry in each used slot
	n     int      // live entries

	blocks  [][]byte // small entries, blockSize bytes each at most
	large   [][]byte // entries above largeEntry bytes, one allocation each
	free    []uint32 // reusable indexes of large
	live    int      // encoded bytes of live small entries
	garbage int      // encoded bytes of replaced or removed small entries
	// minGarbage is the garbage below which the arena is never compacted.
	minGarbage int
	// written is set by every store and release; tidy clears it.
	written bool
}

const (
	blockSize  = 64 << 10
	minBlock   = 512
	largeEntry = 8 << 10
	largeBit   = 1 << 31
	maxBlocks  = 1 << 15 // block index and 16-bit offset fit below largeBit
	minSlots   = 8
	loadNum    = 4 // grow above loadNum/loadDen occupancy
	loadDen    = 5
)

func newTable(seed maphash.Seed) *table { return &table{seed: seed, minGarbage: 4 * blockSize} }

func (t *table) len() int { return t.n }

// entryAt decodes the entry referenced by ref; the returned slices are
// capped so callers cannot append into the arena.
func (t *table) entryAt(ref uint32) (key, value []byte, seq uint64) {
	if ref&largeBit != 0 {
		return decodeEntry(t.large[ref&^largeBit])
	}
	return decodeEntry(t.blocks[ref>>16][ref&0xffff:])
}

func encodedSize(key string, value []byte, seq uint64) int {
	return uvarintLen(seq) + uvarintLen(uint64(len(key))) + uvarintLen(uint64(len(value))) + len(key) + len(value)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// store writes an entry into the arena and returns its reference.
func (t *table) store(key string, value []byte, seq uint64) uint32 {
	t.written = true
	size := encodedSize(key, value, seq)
	var dst []byte
	var ref uint32
	if size > largeEntry || (len(t.blocks) >= maxBlocks && !t.roomInLastBlock(size)) {
		dst = make([]byte, 0, size)
		if k := len(t.free); k > 0 {
			ref = t.free[k-1]
			t.free = t.free[:k-1]
		} else {
			ref = uint32(len(t.large)) | largeBit
			t.large = append(t.large, nil)
		}
		dst = appendEntry(dst, key, value, seq)
		t.large[ref&^largeBit] = dst
		return ref
	}
	if !t.roomInLastBlock(size) {
		t.blocks = append(t.blocks, make([]byte, 0, t.nextBlock(size)))
	}
	bi := len(t.blocks) - 1
	blk := t.blocks[bi]
	ref = uint32(bi)<<16 | uint32(len(blk))
	t.blocks[bi] = appendEntry(blk, key, value, seq)
	t.live += size
	return ref
}

// nextBlock is the capacity of a new block for an entry of size bytes:
// half the live bytes (at least minBlock), up to blockSize. The arena grows
// geometrically, so its slack stays under half the live bytes, and a small
// partition written to after an idle tidy (which fills its last block to
// the brim) takes a small block, not 64 KiB: with one partition per origin
// that was N × 64 KiB allocated, cleared and held on every node by a write
// from each of N origins.
func (t *table) nextBlock(size int) int {
	return min(max(size, minBlock, t.live/2), blockSize)
}

func (t *table) roomInLastBlock(size int) bool {
	if len(t.blocks) == 0 {
		return false
	}
	blk := t.blocks[len(t.blocks)-1]
	return cap(blk)-len(blk) >= size
}

func appendEntry(dst []byte, key string, value []byte, seq uint64) []byte {
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	dst = append(dst, key...)
	return append(dst, value...)
}

// release accounts for an entry that is no longer referenced.
func (t *table) release(ref uint32) {
	t.written = true
	if ref&largeBit != 0 {
		t.large[ref&^largeBit] = nil
		t.free = append(t.free, ref)
		return
	}
	k, v, s := t.entryAt(ref)
	size := uvarintLen(s) + uvarintLen(uint64(len(k))) + uvarintLen(uint64(len(v))) + len(k) + len(v)
	t.live -= size
	t.garbage += size
}

func (t *table) hash(key string) (uint64, uint8) {
	h := maphash.String(t.seed, key)
	return h, uint8(h>>57) + 1
}

// find returns the slot holding key, or -1.
func (t *table) find(key string) int {
	if t.n == 0 {
		return -1
	}
	h, fp := t.hash(key)
	size := len(t.slots)
	for i := home(h, size); ; i = next(i, size) {
		c := t.ctrl[i]
		if c == 0 {
			return -1
		}
		if c == fp {
			if k, _, _ := t.entryAt(t.slots[i]); string(k) == key {
				return i
			}
		}
	}
}

// get returns the value and seq stored for key.
func (t *table) get(key string) ([]byte, uint64, bool) {
	i := t.find(key)
	if i < 0 {
		return nil, 0, false
	}
	_, v, s := t.entryAt(t.slots[i])
	return v, s, true
}

// set stores key -> (value, seq), replacing any previous entry.
func (t *table) set(key string, value []byte, seq uint64) { t.putNewer(key, value, seq) }

// putNewer stores key -> (value, seq) unless the table holds key at seq or
// later. It returns the previous value (nil when absent), the stored value
// (nil when not stored) and whether it stored.
func (t *table) putNewer(key string, value []byte, seq uint64) (old, stored []byte, ok bool) {
	if i := t.find(key); i >= 0 {
		prev := t.slots[i]
		_, old, held := t.entryAt(prev)
		if held >= seq {
			return old, nil, false
		}
		t.slots[i] = t.store(key, value, seq)
		t.release(prev)
		t.maybeCompact()
		_, stored, _ = t.entryAt(t.slots[i])
		return old, stored, true
	}
	return nil, t.insert(key, value, seq), true
}

// insert adds an entry for a key the table does not hold and returns the
// stored value.
func (t *table) insert(key string, value []byte, seq uint64) []byte {
	if (t.n+1)*loadDen > len(t.slots)*loadNum {
		t.grow()
	}
	h, fp := t.hash(key)
	size := len(t.slots)
	i := home(h, size)
	for t.ctrl[i] != 0 {
		i = next(i, size)
	}
	t.ctrl[i] = fp
	t.slots[i] = t.store(key, value, seq)
	t.n++
	_, stored, _ := t.entryAt(t.slots[i])
	return stored
}

// del removes key; it reports whether it was present.
func (t *table) del(key string) bool {
	i := t.find(key)
	if i < 0 {
		return false
	}
	t.release(t.slots[i])
	t.n--
	// Backward-shift deletion: move later members of the probe run into the
	// hole when their home slot allows it, so no tombstones are needed.
	size := len(t.slots)
	hole := i
	for j := next(i, size); t.ctrl[j] != 0; j = next(j, size) {
		k, _, _ := t.entryAt(t.slots[j])
		h := home(maphash.Bytes(t.seed, k), size)
		// j may move to hole when its home h is not in the cyclic range (hole, j].
		if (j > hole && (h <= hole || h > j)) || (j < hole && h <= hole && h > j) {
			t.ctrl[hole], t.slots[hole] = t.ctrl[j], t.slots[j]
			hole = j
		}
	}
	t.ctrl[hole], t.slots[hole] = 0, 0
	t.maybeCompact()
	return true
}

// home maps a hash onto [0, size) (Lemire's multiply-shift), so the table
// can grow by 1.5x rather than 2x, which keeps the worst-case slots per
// entry lower.
func home(h uint64, size int) int {
	hi, _ := bits.Mul64(h, uint64(size))
	return int(hi)
}

func next(i, size int) int {
	if i++; i == size {
		return 0
	}
	return i
}

func (t *table) grow() { t.reserve(1) }

// reserve makes room for extra more entries without further growth.
func (t *table) reserve(extra int) {
	want := t.n + extra
	if want*loadDen <= len(t.slots)*loadNum {
		return
	}
	size := max(minSlots, len(t.slots)*3/2)
	for want*loadDen > size*loadNum {
		size = size * 3 / 2
	}
	oldCtrl, oldSlots := t.ctrl, t.slots
	t.ctrl = make([]uint8, size)
	t.slots = make([]uint32, size)
	for i, c := range oldCtrl {
		if c == 0 {
			continue
		}
		k, _, _ := t.entryAt(oldSlots[i])
		j := home(maphash.Bytes(t.seed, k), size)
		for t.ctrl[j] != 0 {
			j = next(j, size)
		}
		t.ctrl[j], t.slots[j] = c, oldSlots[i]
	}
}

// maybeCompact rewrites the small entries into fresh blocks once the
// garbage outweighs the live bytes, which bounds the arena at about twice
// the live data.
func (t *table) maybeCompact() {
	if t.garbage < t.minGarbage || t.garbage < t.live {
		return
	}
	t.compact(false)
}

// tidy compacts a table that was not written since the previous tidy and
// holds garbage or an unfilled last block, into blocks sized to its live
// entries: a busy table is left to maybeCompact's thresholds (up to
// minGarbage, and as much as it holds live, of dead bytes, plus a part
// filled block), an idle one gives them back. Map.Tick calls it, so a
// table is tidied at most once per idle spell.
func (t *table) tidy() {
	if t.written {
		t.written = false
		return
	}
	if len(t.blocks) == 0 {
		return
	}
	last := t.blocks[len(t.blocks)-1]
	if t.garbage == 0 && cap(last) == len(last) {
		return
	}
	t.compact(true)
	t.written = false
}

// compact copies the live small entries into fresh blocks; with exact each
// block is sized to the live bytes still to copy (up to blockSize) rather
// than blockSize, so an idle table holds its live bytes and at most an
// entry's worth of slack a block.
func (t *table) compact(exact bool) {
	old := t.blocks
	left := t.live
	t.blocks, t.live, t.garbage = nil, 0, 0
	for i, c := range t.ctrl {
		if c == 0 || t.slots[i]&largeBit != 0 {
			continue
		}
		ref := t.slots[i]
		blk := old[ref>>16]
		k, v, s := decodeEntry(blk[ref&0xffff:])
		size := encodedSize(unsafeString(k), v, s)
		if exact && !t.roomInLastBlock(size) {
			t.blocks = append(t.blocks, make([]byte, 0, min(max(left, size), blockSize)))
		}
		left -= size
		t.slots[i] = t.store(unsafeString(k), v, s)
	}
}

func decodeEntry(b []byte) (key, value []byte, seq uint64) {
	seq, n1 := binary.Uvarint(b)
	kl, n2 := binary.Uvarint(b[n1:])
	vl, n3 := binary.Uvarint(b[n1+n2:])
	off := n1 + n2 + n3
	key = b[off : off+int(kl) : off+int(kl)]
	off += int(kl)
	return key, b[off : off+int(vl) : off+int(vl)], seq
}

// tableEntry is one entry seen through the arena: the slices alias it.
type tableEntry struct {
	key   []byte
	value []byte
	seq   uint64
}

// sorted returns every entry ordered by key.
func (t *table) sorted() []tableEntry {
	type item struct {
		key string // aliases the arena for the duration of the sort
		ref uint32
	}
	items := make([]item, 0, t.n)
	for i, c := range t.ctrl {
		if c != 0 {
			k, _, _ := t.entryAt(t.slots[i])
			items = append(items, item{unsafeString(k), t.slots[i]})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.key, b.key) })
	out := make([]tableEntry, len(items))
	for i, it := range items {
		k, v, s := t.entryAt(it.ref)
		out[i] = tableEntry{key: k, value: v, seq: s}
	}
	return out
}

// each calls fn for every entry in table order (not sorted).
func (t *table) each(fn func(tableEntry)) {
	for i, c := range t.ctrl {
		if c == 0 {
			continue
		}
		k, v, s := t.entryAt(t.slots[i])
		fn(tableEntry{key: k, value: v, seq: s})
	}
}

// unsafeString views b as a string without copying. Only used on arena
// bytes, which are never modified after they are written, and never for a
// string that outlives the call it is made for.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
