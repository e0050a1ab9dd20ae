package cluster

import (
	"errors"
	"testing"
)

// Volatile keeps the named registries out of the store: their writes only
// apply (an apply error still fails the write) and Load finds nothing in
// them, while every other registry is stored as before.
func TestVolatileRegistriesAreNotStored(t *testing.T) {
	under := NewMemoryStorage()
	st := Volatile(under, "sessions")
	applied := 0
	apply := func() error { applied++; return nil }
	if err := st.Write("sessions", "s1", []byte("v"), apply); err != nil {
		t.Fatal(err)
	}
	if err := st.Write("conns", "c1", []byte("v"), apply); err != nil {
		t.Fatal(err)
	}
	if applied != 2 {
		t.Fatalf("apply ran %d times, want 2", applied)
	}
	boom := errors.New("boom")
	if err := st.Write("sessions", "s2", []byte("v"), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing apply on a volatile registry returned %v", err)
	}
	load := func(s Storage, reg string) map[string]string {
		got := map[string]string{}
		if err := s.Load(reg, func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := load(under, "sessions"); len(got) != 0 {
		t.Fatalf("the store holds %v for a volatile registry", got)
	}
	if got := load(st, "sessions"); len(got) != 0 {
		t.Fatalf("Load of a volatile registry found %v", got)
	}
	if got := load(st, "conns"); got["c1"] != "v" {
		t.Fatalf("a stored registry loads %v, want c1=v", got)
	}
}
