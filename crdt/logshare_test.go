package crdt

import (
	"bytes"
	"fmt"
	"testing"
)

// The log shares its own writes' values with the arena instead of copying
// them. Across compactions (which move live entries into fresh blocks),
// every suffix the log serves must still carry, for each key, the last
// value written after the suffix's start, byte for byte.
func TestLoggedValuesSurviveCompaction(t *testing.T) {
	o := Origin{Name: "n1", Epoch: 1}
	m := New(o, Config{})
	type write struct {
		key   string
		value []byte
		seq   uint64
	}
	var writes []write
	var first *byte // the arena's first block, replaced by compaction
	for round := range 12 {
		for k := range 40 {
			key := fmt.Sprintf("k%02d", k)
			value := bytes.Repeat([]byte{byte('a' + (round+k)%26)}, 1500+round*7+k)
			d, err := m.Put(key, value)
			if err != nil {
				t.Fatal(err)
			}
			writes = append(writes, write{key, value, d.To})
			if first == nil {
				first = &m.parts[o.Name].entries.blocks[0][0]
			}
		}
	}
	if &m.parts[o.Name].entries.blocks[0][0] == first {
		t.Fatal("no compaction happened: the test covers nothing")
	}
	last := writes[len(writes)-1].seq
	for _, since := range []uint64{0, 1, 100, 250, 400, last - 1} {
		d, ok := m.DeltaSince(o, since)
		if !ok {
			continue // before the log's reach
		}
		want := map[string][]byte{}
		for _, w := range writes {
			if w.seq > since {
				want[w.key] = w.value
			}
		}
		if len(d.Puts) != len(want) {
			t.Fatalf("since %d: %d puts, want %d", since, len(d.Puts), len(want))
		}
		for _, p := range d.Puts {
			if !bytes.Equal(p.Value, want[p.Key]) {
				t.Fatalf("since %d: %s carries %.20q… (%d bytes), want %.20q… (%d bytes)", since, p.Key, p.Value, len(p.Value), want[p.Key], len(want[p.Key]))
			}
		}
	}
}
