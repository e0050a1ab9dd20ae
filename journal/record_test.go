package journal

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// Every record decodes to itself, and every proper prefix of it, and every
// single-byte change, is refused as torn.
func TestRecordRoundTripAndTornPrefixes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringMatching(`[A-Za-z0-9_-]{1,32}`).Draw(t, "key")
		del := rapid.Bool().Draw(t, "del")
		var value []byte
		if !del {
			value = rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "value")
		}
		b := appendRecord(nil, record{key: key, value: value, del: del})
		if len(b) != size(key, value) {
			t.Fatalf("encoded %d bytes, size says %d", len(b), size(key, value))
		}
		r, n, err := decode(b)
		if err != nil || n != len(b) || r.key != key || r.del != del || !bytes.Equal(r.value, value) {
			t.Fatalf("decode = %+v, %d, %v", r, n, err)
		}
		for cut := range len(b) {
			if _, _, err := decode(b[:cut]); !errors.Is(err, errTorn) {
				t.Fatalf("prefix of %d/%d bytes: err = %v, want torn", cut, len(b), err)
			}
		}
		at := rapid.IntRange(0, len(b)-1).Draw(t, "flip")
		c := bytes.Clone(b)
		c[at] ^= byte(rapid.IntRange(1, 255).Draw(t, "mask"))
		if r2, _, err := decode(c); err == nil {
			// A flipped length byte can still describe a shorter valid-looking
			// body only if the checksum matches too, which CRC-32C rules out
			// for single-byte changes.
			t.Fatalf("a changed byte at %d decoded as %+v", at, r2)
		}
	})
}

func TestValidateBounds(t *testing.T) {
	if err := validate("", nil); err == nil {
		t.Error("empty key accepted")
	}
	if err := validate(string(make([]byte, MaxKey+1)), nil); err == nil {
		t.Error("oversized key accepted")
	}
	if err := validate("k", make([]byte, MaxValue+1)); err == nil {
		t.Error("oversized value accepted")
	}
	if !needsCompaction(10<<20, 1<<20, 4<<20) || needsCompaction(3<<20, 0, 4<<20) || needsCompaction(10<<20, 6<<20, 4<<20) {
		t.Error("compaction rule")
	}
}
