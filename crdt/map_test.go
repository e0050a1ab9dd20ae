package crdt

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPutValidation(t *testing.T) {
	m := New(originA, Config{MaxKeyLen: 8, MaxValueLen: 4})
	for _, tc := range []struct {
		key   string
		value string
		want  error
	}{
		{"", "v", ErrInvalidKey},
		{"123456789", "v", ErrInvalidKey},
		{"\xff", "v", ErrInvalidKey},
		{"k", "12345", ErrValueTooLarge},
		{"12345678", "1234", nil},
		{"k", "", nil},
	} {
		_, err := m.Put(tc.key, []byte(tc.value))
		if !errors.Is(err, tc.want) {
			t.Errorf("Put(%q, %q) = %v, want %v", tc.key, tc.value, err, tc.want)
		}
	}
	if got := m.Seq(originA); got != 2 {
		t.Errorf("seq = %d after two valid puts, want 2", got)
	}
	e, ok := m.Get(originA, "k")
	if !ok || e.Value == nil || len(e.Value) != 0 {
		t.Errorf("empty value: got %#v %v, want a non-nil empty value", e.Value, ok)
	}
}

func TestApplyRejectsOversizedAndOwnName(t *testing.T) {
	m := New(originB, Config{MaxKeyLen: 8, MaxValueLen: 4})
	for _, d := range []Delta{
		{Origin: originA, To: 1, Puts: []Put{{Key: strings.Repeat("k", 9), Seq: 1}}},
		{Origin: originA, To: 1, Puts: []Put{{Key: "k", Value: []byte("12345"), Seq: 1}}},
		{Origin: originA, To: 1, Removes: []Removal{{Key: "k", Seq: 0}}},
		{Origin: originA, To: 1, Removes: []Removal{{Key: "k", Seq: 2}}},
		{Origin: Origin{Name: "b", Epoch: 2}, To: 1},
		{Origin: Origin{Name: "bad name", Epoch: 2}, To: 1},
	} {
		if res, err := m.Apply(d); err == nil {
			t.Errorf("Apply(%s) = %+v, want an error", formatDelta(d), res)
		}
	}
	if len(m.Digest()) != 1 {
		t.Errorf("rejected deltas changed the map: %v", m.Digest())
	}
	if res, err := m.Apply(Delta{Origin: Origin{Name: "b", Epoch: 0x0}, To: 1}); err == nil {
		t.Errorf("zero epoch accepted: %+v", res)
	}
	if res, err := m.Apply(Delta{Origin: Origin{Name: "b", Epoch: 0}, To: 0}); err == nil {
		t.Errorf("zero epoch accepted: %+v", res)
	}
	// An older incarnation of our own name is stale, not an error.
	self := New(Origin{Name: "b", Epoch: 5}, Config{})
	if res, err := self.Apply(Delta{Origin: Origin{Name: "b", Epoch: 4}, To: 1, Puts: []Put{{Key: "k", Seq: 1}}}); err != nil || !res.Ignored {
		t.Errorf("older own epoch: %+v %v, want ignored", res, err)
	}
}

func TestReadsAcrossOrigins(t *testing.T) {
	m := New(originB, Config{})
	c := Origin{Name: "c", Epoch: 3}
	for _, d := range []Delta{
		{Origin: originA, To: 2, Puts: []Put{{Key: "x", Value: []byte("a"), Seq: 1}, {Key: "y", Value: []byte("a"), Seq: 2}}},
		{Origin: c, To: 1, Puts: []Put{{Key: "x", Value: []byte("c"), Seq: 1}}},
	} {
		if _, err := m.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	m.Put("x", []byte("b"))
	var got []string
	for _, e := range m.Lookup("x") {
		got = append(got, e.Origin.String()+"="+string(e.Value))
	}
	if strings.Join(got, " ") != "a@1=a b@1=b c@3=c" {
		t.Errorf("Lookup(x) = %v", got)
	}
	if n := m.Count(); n != 4 {
		t.Errorf("Count = %d, want 4 (a's x and y, b's x, c's x)", n)
	}
	m.Hide(c)
	if n := m.Count(); n != 3 {
		t.Errorf("Count with c hidden = %d, want 3", n)
	}
	got = got[:0]
	m.Range(func(e Entry) bool {
		got = append(got, e.Origin.String()+"/"+e.Key)
		return len(got) < 3
	})
	if strings.Join(got, " ") != "a@1/x a@1/y b@1/x" {
		t.Errorf("Range = %v", got)
	}
	if _, ok := m.Get(c, "x"); ok || m.Len(c) != 0 || !m.Hidden(c) {
		t.Errorf("hidden origin readable")
	}
	if e, ok := m.Get(originA, "y"); !ok || !bytes.Equal(e.Value, []byte("a")) || e.Seq != 2 {
		t.Errorf("Get(a, y) = %+v %v", e, ok)
	}
}

func TestMissingAcrossEpochs(t *testing.T) {
	m := New(originB, Config{})
	a2 := Origin{Name: "a", Epoch: 2}
	if _, err := m.Apply(Delta{Origin: a2, To: 3}); err != nil {
		t.Fatal(err)
	}
	m.Put("k", nil)
	peer := []Version{{Origin: originA, Seq: 9}, {Origin: originB, Seq: 1}, {Origin: Origin{Name: "z", Epoch: 1}, Seq: 4}}
	got := m.Missing(peer)
	want := []Version{{Origin: a2, Seq: 0}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("Missing = %v, want %v", got, want)
	}
	peer[1].Seq = 0
	if got := m.Missing(peer); len(got) != 2 || got[1] != (Version{Origin: originB, Seq: 0}) {
		t.Errorf("Missing = %v", got)
	}
}

func TestSnapshotReceiverRejects(t *testing.T) {
	owner := New(originA, Config{})
	owner.Put("a", []byte("1"))
	owner.Put("b", []byte("2"))
	chunks := owner.Snapshot(originA, 1)
	bad := map[string]func([]SnapshotChunk) []SnapshotChunk{
		"out of order": func(c []SnapshotChunk) []SnapshotChunk { return []SnapshotChunk{c[1], c[0]} },
		"other seq": func(c []SnapshotChunk) []SnapshotChunk {
			c[1].Seq++
			return c
		},
		"keys not ascending": func(c []SnapshotChunk) []SnapshotChunk {
			c[0].Entries, c[1].Entries = c[1].Entries, c[0].Entries
			return c
		},
		"entry past seq": func(c []SnapshotChunk) []SnapshotChunk {
			c[1].Entries = []Put{{Key: "c", Seq: 3}}
			return c
		},
		"missing last": func(c []SnapshotChunk) []SnapshotChunk { return c[:1] },
	}
	for name, mutate := range bad {
		cs := mutate(cloneChunks(chunks))
		m := New(originB, Config{})
		rcv := m.NewSnapshotReceiver(originA, cs[0].Seq)
		var err error
		for _, c := range cs {
			if err = rcv.Add(c); err != nil {
				break
			}
		}
		ok := false
		if err == nil {
			ok, err = rcv.Commit()
		}
		if !errors.Is(err, ErrMalformedSnapshot) || ok || m.Seq(originA) != 0 {
			t.Errorf("%s: commit %v, err %v, seq %d; want ErrMalformedSnapshot and nothing changed", name, ok, err, m.Seq(originA))
		}
	}
	m := New(originA, Config{})
	if err := m.NewSnapshotReceiver(originA, 2).Add(chunks[0]); !errors.Is(err, ErrOwnOrigin) {
		t.Errorf("own origin snapshot: %v", err)
	}
}

func cloneChunks(cs []SnapshotChunk) []SnapshotChunk {
	out := make([]SnapshotChunk, len(cs))
	for i, c := range cs {
		c.Entries = append([]Put(nil), c.Entries...)
		out[i] = c
	}
	return out
}

// What a hidden origin's relayed data changes is reported through
// OnHiddenChange only, by deltas and snapshots alike; the visible feed stays
// silent until the origin is shown again.
func TestHiddenOriginsChangesGoToTheHiddenFeed(t *testing.T) {
	owner := New(originA, Config{})
	m := New(originB, Config{})
	var visible, hidden []string
	m.OnChange(func(ch Change) { visible = append(visible, fmt.Sprintf("%s=%s", ch.Key, ch.New)) })
	m.OnHiddenChange(func(ch Change) {
		if !ch.Hidden || ch.Origin != originA {
			t.Errorf("hidden feed got %+v", ch)
		}
		hidden = append(hidden, fmt.Sprintf("%s=%s", ch.Key, ch.New))
	})
	d, _ := owner.Put("x", []byte("1"))
	if _, err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	m.Hide(originA)
	visible = nil
	d, _ = owner.Put("x", []byte("2"))
	if _, err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	d, _ = owner.Remove("x")
	if _, err := m.Apply(d); err != nil {
		t.Fatal(err)
	}
	owner.Put("y", []byte("3"))
	rc := m.NewSnapshotReceiver(originA, owner.Seq(originA))
	for _, c := range owner.Snapshot(originA, 1<<10) {
		if err := rc.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := rc.Commit(); !ok || err != nil {
		t.Fatalf("Commit = %t %v", ok, err)
	}
	if want := "x=2 x= y=3"; strings.Join(hidden, " ") != want {
		t.Errorf("hidden feed = %q, want %q", strings.Join(hidden, " "), want)
	}
	if len(visible) != 0 {
		t.Errorf("visible feed reported %v while a was hidden", visible)
	}
	m.Unhide(originA)
	if want := "y=3"; strings.Join(visible, " ") != want {
		t.Errorf("unhiding reported %v, want %q", visible, want)
	}
}
