package crdt

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTableMatchesMap drives the compact table and a Go map with the same
// random operations (including large entries, overwrites that trigger
// compaction, and deletions that shift probe runs) and checks they agree.
func TestTableMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb := newTable(maphash.MakeSeed())
		tb.minGarbage = rapid.SampledFrom([]int{0, 1000, 4 * blockSize}).Draw(t, "minGarbage")
		model := map[string]tableEntry{}
		keys := rapid.SampledFrom(keyPool(40))
		var seq uint64
		n := rapid.IntRange(1, 400).Draw(t, "ops")
		for i := 0; i < n; i++ {
			k := keys.Draw(t, "key")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				seq++
				size := rapid.SampledFrom([]int{0, 3, 100, 5000, largeEntry + 1, 40000}).Draw(t, "size")
				v := bytes.Repeat([]byte{byte(seq)}, size)
				tb.set(k, v, seq)
				model[k] = tableEntry{key: []byte(k), value: v, seq: seq}
			case 2:
				_, want := model[k]
				if got := tb.del(k); got != want {
					t.Fatalf("del(%q) = %v, want %v", k, got, want)
				}
				delete(model, k)
			case 3:
				v, s, ok := tb.get(k)
				e, want := model[k]
				if ok != want || (ok && (s != e.seq || !bytes.Equal(v, e.value))) {
					t.Fatalf("get(%q) = %d %v, want %d %v", k, s, ok, e.seq, want)
				}
			}
		}
		if tb.len() != len(model) {
			t.Fatalf("len = %d, want %d", tb.len(), len(model))
		}
		got := tb.sorted()
		want := make([]string, 0, len(model))
		for k := range model {
			want = append(want, k)
		}
		slices.Sort(want)
		if len(got) != len(want) {
			t.Fatalf("sorted has %d entries, want %d", len(got), len(want))
		}
		for i, e := range got {
			m := model[want[i]]
			if string(e.key) != want[i] || e.seq != m.seq || !bytes.Equal(e.value, m.value) {
				t.Fatalf("entry %d = %q@%d, want %q@%d", i, e.key, e.seq, want[i], m.seq)
			}
		}
	})
}

// TestTableValuesStable checks that values handed out stay unchanged after
// overwrites, deletions and compaction, and cannot be appended into.
func TestTableValuesStable(t *testing.T) {
	tb := newTable(maphash.MakeSeed())
	tb.set("a", []byte("first"), 1)
	v, _, _ := tb.get("a")
	_ = append(v, 'X')
	tb.set("b", []byte("second"), 2)
	if b, _, _ := tb.get("b"); string(b) != "second" {
		t.Fatalf("append through a returned value changed the arena: %q", b)
	}
	for i := range 20000 {
		tb.set("a", bytes.Repeat([]byte{'z'}, 100), uint64(3+i))
	}
	if string(v) != "first" {
		t.Fatalf("old value changed to %q", v)
	}
	if tb.garbage > tb.live+4*blockSize+largeEntry {
		t.Fatalf("no compaction: garbage %d live %d", tb.garbage, tb.live)
	}
}

func keyPool(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%d", i)
	}
	return out
}
