package crdt

import "testing"

// Readmit lets a dropped origin's own epoch back at once, while older
// epochs of its name stay refused for the rest of the drop memory.
func TestReadmitAcceptsTheSameEpochOnly(t *testing.T) {
	old := Origin{Name: "a", Epoch: 1}
	cur := Origin{Name: "a", Epoch: 2}
	dOld, _ := New(old, Config{}).Put("k", []byte("old"))
	dCur, _ := New(cur, Config{}).Put("k", []byte("cur"))
	m := New(originB, Config{DropMemory: 100})
	if _, err := m.Apply(dCur); err != nil {
		t.Fatal(err)
	}
	m.Drop(cur)
	if res, _ := m.Apply(dCur); !res.Ignored {
		t.Fatalf("dropped origin applied: %+v", res)
	}
	if m.Readmit(old) {
		t.Fatal("readmitted an epoch older than the one dropped")
	}
	if !m.Readmit(cur) {
		t.Fatal("Readmit reported the dropped origin as not dropped")
	}
	if m.Readmit(cur) {
		t.Fatal("a second Readmit reported a drop again")
	}
	if res, err := m.Apply(dCur); err != nil || !res.Applied {
		t.Fatalf("readmitted origin: %+v %v, want applied", res, err)
	}
	if e, ok := m.Get(cur, "k"); !ok || string(e.Value) != "cur" {
		t.Fatalf("readmitted entry: %+v %t", e, ok)
	}
	if !m.Dropped(old) {
		t.Fatal("the older epoch is no longer refused")
	}
	if res, _ := m.Apply(dOld); !res.Ignored {
		t.Fatalf("older epoch applied after a readmit: %+v", res)
	}
}
