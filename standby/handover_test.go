package standby

import (
	"errors"
	"testing"
)

func holderWith(t *testing.T, c Copy) *Holder {
	t.Helper()
	h, err := OpenHolder(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if _, err := h.Hold(c); err != nil {
		t.Fatal(err)
	}
	return h
}

func accept(Copy) error { return nil }

// A draining owner's handover takes the copy only when it is the one the
// owner names (its own, of its epoch, accepted as its final snapshot);
// any other refusal leaves the copy and the fences as they were.
func TestHandOverTakesOnlyTheOwnersFinalCopy(t *testing.T) {
	held := Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 7, Snapshot: []byte(`{"n":7}`)}
	h := holderWith(t, held)
	notFinal := errors.New("one write behind")
	for _, tc := range []struct {
		name, owner string
		epoch       uint64
		check       func(Copy) error
	}{
		{"another owner", "node2", 3, accept},
		{"an older epoch", "node1", 2, accept},
		{"a later epoch", "node1", 4, accept},
		{"not the final snapshot", "node1", 3, func(Copy) error { return notFinal }},
	} {
		if _, _, err := h.HandOver("ct", tc.owner, tc.epoch, tc.check); !errors.Is(err, ErrNotFinal) {
			t.Errorf("%s: HandOver answered %v, want ErrNotFinal", tc.name, err)
		}
	}
	if _, _, err := h.HandOver("other", "node1", 3, accept); !errors.Is(err, ErrNoCopy) {
		t.Errorf("a session not held: HandOver answered %v, want ErrNoCopy", err)
	}
	if c, ok := h.Get("ct"); !ok || c.Seq != 7 {
		t.Fatalf("after refusals the holder has %+v, %v; want the copy untouched", c, ok)
	}
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 8, Snapshot: []byte(`{"n":8}`)}); err != nil {
		t.Fatalf("a refused handover fenced the owner's epoch: %v", err)
	}

	c, _, err := h.HandOver("ct", "node1", 3, accept)
	if err != nil || c.Seq != 8 {
		t.Fatalf("HandOver = %+v, %v; want the copy of seq 8", c, err)
	}
	if _, ok := h.Get("ct"); ok {
		t.Fatal("the handed-over copy is still held as a standby copy")
	}
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 9, Snapshot: []byte(`{"n":9}`)}); !errors.Is(err, ErrStale) {
		t.Fatalf("the old owner's epoch after the handover: Hold answered %v, want ErrStale", err)
	}
}

// When the session cannot start from the handed-over copy, undo puts the
// copy back and lifts the fence: the owner keeps the session under its
// epoch (or copies it) and still ships it here.
func TestHandOverUndoRestoresTheCopyAndTheFence(t *testing.T) {
	h := holderWith(t, Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 7, Snapshot: []byte(`{"n":7}`)})
	_, undo, err := h.HandOver("ct", "node1", 3, accept)
	if err != nil {
		t.Fatal(err)
	}
	undo()
	if c, ok := h.Get("ct"); !ok || c.Seq != 7 || c.Epoch != 3 {
		t.Fatalf("after undo the holder has %+v, %v; want the copy back", c, ok)
	}
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 8, Snapshot: []byte(`{"n":8}`)}); err != nil {
		t.Fatalf("after undo the owner's next snapshot was refused: %v", err)
	}
}

// A handover never lowers a fence a failover set before it: undo restores
// the fence that was there.
func TestHandOverUndoKeepsAnEarlierFence(t *testing.T) {
	h := holderWith(t, Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 1, Snapshot: []byte(`{"n":1}`)})
	if _, err := h.Promote("ct"); err != nil { // fences epoch 4
		t.Fatal(err)
	}
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node2", Epoch: 5, Seq: 1, Snapshot: []byte(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	_, undo, err := h.HandOver("ct", "node2", 5, accept)
	if err != nil {
		t.Fatal(err)
	}
	undo()
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node1", Epoch: 3, Seq: 2, Snapshot: []byte(`{"n":3}`)}); !errors.Is(err, ErrStale) {
		t.Fatalf("after undo an epoch below the failover's fence answered %v, want ErrStale", err)
	}
}
