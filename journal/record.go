package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A record on disk is
//
//	length  uint32  bytes of body
//	crc     uint32  CRC-32C of body
//	body    op (1 byte) | key length (uint16) | key | value
//
// all little-endian. A put carries the whole new value of its key; a delete
// carries no value. The checksum covers the body, so a record cut anywhere
// (a torn tail after a crash) or changed on disk never decodes.
const (
	headerSize = 8
	opPut      = 1
	opDelete   = 2
)

// MaxKey and MaxValue bound a record: keys are session ids, values are
// session snapshots. A length past them is read as a torn or corrupt
// record, never allocated.
const (
	MaxKey   = 1 << 10
	MaxValue = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn marks bytes that do not hold a whole valid record: a cut tail or
// corruption. decode returns it wrapped with what was wrong.
var errTorn = errors.New("torn or corrupt record")

// record is one decoded entry.
type record struct {
	del   bool
	key   string
	value []byte
}

// size is the encoded length of a record with this key and value.
func size(key string, value []byte) int { return headerSize + 3 + len(key) + len(value) }

// appendRecord appends the encoding of r to dst.
func appendRecord(dst []byte, r record) []byte {
	body := 3 + len(r.key) + len(r.value)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(body))
	crcAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	start := len(dst)
	op := byte(opPut)
	if r.del {
		op = opDelete
	}
	dst = append(dst, op)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.key)))
	dst = append(dst, r.key...)
	dst = append(dst, r.value...)
	binary.LittleEndian.PutUint32(dst[crcAt:], crc32.Checksum(dst[start:], castagnoli))
	return dst
}

// validate checks a record before it is written.
func validate(key string, value []byte) error {
	switch {
	case key == "":
		return errors.New("journal: empty key")
	case len(key) > MaxKey:
		return fmt.Errorf("journal: key of %d bytes exceeds the limit of %d", len(key), MaxKey)
	case len(value) > MaxValue:
		return fmt.Errorf("journal: value of %d bytes for %q exceeds the limit of %d", len(value), key, MaxValue)
	}
	return nil
}

// bodyLen reads the body length from a header and checks it against the
// bounds; a length outside them is errTorn.
func bodyLen(hdr []byte) (int, error) {
	n := binary.LittleEndian.Uint32(hdr)
	if n < 3 || n > 3+MaxKey+MaxValue {
		return 0, fmt.Errorf("body length %d out of bounds: %w", n, errTorn)
	}
	return int(n), nil
}

// decodeBody checks body against the header's checksum and decodes it. The
// returned value aliases body.
func decodeBody(hdr, body []byte) (record, error) {
	if want := binary.LittleEndian.Uint32(hdr[4:]); crc32.Checksum(body, castagnoli) != want {
		return record{}, fmt.Errorf("checksum mismatch: %w", errTorn)
	}
	kl := int(binary.LittleEndian.Uint16(body[1:]))
	if 3+kl > len(body) || kl == 0 {
		return record{}, fmt.Errorf("key length %d does not fit the body: %w", kl, errTorn)
	}
	r := record{key: string(body[3 : 3+kl]), value: body[3+kl:]}
	switch body[0] {
	case opPut:
	case opDelete:
		if len(r.value) != 0 {
			return record{}, fmt.Errorf("delete of %q carries a value: %w", r.key, errTorn)
		}
		r.del, r.value = true, nil
	default:
		return record{}, fmt.Errorf("unknown op %d: %w", body[0], errTorn)
	}
	return r, nil
}

// decode reads the record at the start of b and returns it with its encoded
// length. A short or invalid prefix is errTorn.
func decode(b []byte) (record, int, error) {
	if len(b) < headerSize {
		return record{}, 0, fmt.Errorf("%d bytes left, a header needs %d: %w", len(b), headerSize, errTorn)
	}
	n, err := bodyLen(b)
	if err != nil {
		return record{}, 0, err
	}
	if len(b) < headerSize+n {
		return record{}, 0, fmt.Errorf("record of %d bytes cut at %d: %w", headerSize+n, len(b), errTorn)
	}
	r, err := decodeBody(b[:headerSize], b[headerSize:headerSize+n])
	return r, headerSize + n, err
}
