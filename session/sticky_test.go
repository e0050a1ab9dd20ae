package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A sticky set answers by name as a map would, in the order tools were
// first seen, below and above the size at which it starts indexing them;
// with never changes the set it was called on (snapshots and readers hold
// it), and the limit refuses new tools, not redefinitions.
func TestStickySetAnswersByNameAcrossItsIndexThreshold(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 3))
		limit := 0
		if seed%4 == 0 {
			limit = 5 + r.IntN(30)
		}
		s := newSticky("s", limit)
		want := map[string]string{discoverTool("s").Name: discoverTool("s").Description}
		order := []string{discoverTool("s").Name}
		for range 60 {
			var batch []Tool
			for range 1 + r.IntN(4) {
				name := fmt.Sprintf("s.w%02d.click", r.IntN(50))
				batch = append(batch, Tool{Name: name, Session: "s", Description: fmt.Sprint(r.IntN(3))})
			}
			before := slices.Clone(s.tools)
			next, changed, refused := s.with(batch)
			if !slices.EqualFunc(before, s.tools, Tool.Equal) {
				t.Fatalf("seed %d: with changed the set it was called on", seed)
			}
			wantChanged, wantRefused := false, 0
			for _, tl := range batch {
				if d, ok := want[tl.Name]; ok {
					if d != tl.Description {
						want[tl.Name], wantChanged = tl.Description, true
					}
					continue
				}
				if limit > 0 && len(order) >= limit {
					wantRefused++
					continue
				}
				want[tl.Name], wantChanged = tl.Description, true
				order = append(order, tl.Name)
			}
			if changed != wantChanged || refused != wantRefused {
				t.Fatalf("seed %d: changed %v refused %d; want %v, %d", seed, changed, refused, wantChanged, wantRefused)
			}
			s = next
			for name, d := range want {
				if got, ok := s.get(name); !ok || got.Description != d {
					t.Fatalf("seed %d: %s reads %+v (%v); want description %q", seed, name, got, ok, d)
				}
			}
			if _, ok := s.get("s.nothing.click"); ok {
				t.Fatalf("seed %d: a tool never added reads", seed)
			}
			got := make([]string, len(s.tools))
			for i, tl := range s.tools {
				got[i] = tl.Name
			}
			if !slices.Equal(got, order) {
				t.Fatalf("seed %d: order %v; want %v", seed, got, order)
			}
			if (s.index != nil) != (len(s.tools) > smallSticky) {
				t.Fatalf("seed %d: %d tools, indexed %v", seed, len(s.tools), s.index != nil)
			}
		}
	}
}

// The tool set Manager.Tools returns is the session's published set, not
// a copy: it must never change after it was handed out, however the
// session's tools change later.
func TestAToolSetOnceReturnedNeverChanges(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	before, err := f.m.Tools("s")
	if err != nil {
		t.Fatal(err)
	}
	kept := slices.Clone(before)
	f.call("s", "modal.click", nil) // opens a dialog: its tools join the set
	after, err := f.m.Tools("s")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) <= len(before) {
		t.Fatalf("opening the dialog added no tool: %d -> %d", len(before), len(after))
	}
	if !slices.EqualFunc(before, kept, Tool.Equal) {
		t.Fatalf("a tool set already returned changed:\nwas %+v\nnow %+v", kept, before)
	}
}
