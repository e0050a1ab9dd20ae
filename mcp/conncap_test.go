package mcp

import (
	"slices"
	"testing"
	"time"
)

func TestPlanEvictionRevokesLeastRecentlyActiveFirst(t *testing.T) {
	now := time.Unix(10_000, 0)
	conns := []ConnActivity{
		{ID: "a", LastWrite: now.Add(-2 * time.Hour)},
		{ID: "b", LastWrite: now.Add(-3 * time.Hour)}, // least recent
		{ID: "c", LastWrite: now.Add(-time.Minute)},
		{ID: "d", LastWrite: now.Add(-4 * time.Hour)},                  // written long ago, but served here just now
		{ID: "e", LastWrite: now.Add(-5 * time.Hour), Streaming: true}, // a client listens on it
	}
	seen := map[string]time.Time{"d": now.Add(-time.Second)}
	for _, tc := range []struct {
		limit int
		evict []string
	}{
		{limit: 6, evict: nil},
		{limit: 5, evict: []string{"b"}},
		{limit: 4, evict: []string{"b", "a"}},
		{limit: 3, evict: []string{"b", "a", "c"}},
		{limit: 1, evict: []string{"b", "a", "c", "d", "e"}},
	} {
		if got := planEviction(conns, seen, tc.limit); !slices.Equal(got, tc.evict) {
			t.Errorf("limit %d: evict %v; want %v", tc.limit, got, tc.evict)
		}
	}
}

func TestConnCapRevokesOnlyWhenAtTheLimitAndOnlyThatPrincipals(t *testing.T) {
	now := time.Unix(10_000, 0)
	c := newConnCap(2, 30*time.Minute)
	held := map[string][]ConnActivity{"alice": {{ID: "old", LastWrite: now.Add(-time.Hour)}}}
	var revoked []string
	front := &capRecorder{revoked: &revoked}
	c.attach(fakeRegistry{held: held}, front)
	if got := c.admit("alice"); len(got) != 0 || len(revoked) != 0 {
		t.Fatalf("under the limit: revoked %v", revoked)
	}
	held["alice"] = append(held["alice"], ConnActivity{ID: "new", LastWrite: now})
	if got := c.admit("alice"); !slices.Equal(got, []string{"old"}) || !slices.Equal(revoked, []string{"old"}) {
		t.Fatalf("at the limit: admit %v, revoked %v; want [old]", got, revoked)
	}
	// A request served here makes "old" the more recent one.
	revoked = nil
	c.touch("old", now.Add(time.Second))
	if got := c.admit("alice"); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("after a request on old: revoked %v; want [new]", got)
	}
	// A stream held on this node keeps a connection last in line.
	revoked = nil
	front.streaming = "new"
	if got := c.admit("alice"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("with new's stream held here: revoked %v; want [old]", got)
	}
	if got := c.admit("bob"); len(got) != 0 {
		t.Errorf("bob: revoked %v", got)
	}
	if got := c.admit(""); len(got) != 0 {
		t.Errorf("unauthenticated: revoked %v", got)
	}
	if d := newConnCap(0, time.Minute); d.limit != DefaultConnectionsPerPrincipal {
		t.Errorf("default limit %d", d.limit)
	}
}

// capRecorder is a front that records what the cap evicts and holds the
// stream of connection streaming.
type capRecorder struct {
	revoked   *[]string
	streaming string
}

func (f *capRecorder) evict(id string)            { *f.revoked = append(*f.revoked, id) }
func (f *capRecorder) holdsStream(id string) bool { return id == f.streaming }
