package cluster

import (
	"testing"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// Writing a node's entry again with the value it already holds changes
// nothing a reader could see, so it is not written: no new sequence
// number, so no store transaction, no delta to peers and no second copy
// in the map's arena (a session start wrote its record and tool set twice
// each). A different value, or the same value after a removal, is written.
func TestPuttingTheSameValueAgainWritesNothing(t *testing.T) {
	n := startNode(t, memnet.New(), "n1", "")
	r := n.regs["sessions"]
	seq := func() uint64 {
		e, ok := r.Get(n.c.Origin(), "k")
		if !ok {
			t.Fatal("k is not held")
		}
		return e.Seq
	}
	if err := r.Put("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	first := seq()
	if err := r.Put("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if got := seq(); got != first {
		t.Fatalf("the same value was written again: seq %d → %d", first, got)
	}
	if err := r.Put("k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if got := seq(); got == first {
		t.Fatal("a new value was not written")
	}
	if err := r.Remove("k"); err != nil {
		t.Fatal(err)
	}
	if err := r.Put("k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if e, ok := r.Get(n.c.Origin(), "k"); !ok || string(e.Value) != "v2" {
		t.Fatal("the value put again after its removal is not held")
	}
}
