package mcp

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanAdmissionEvictsIdleLeastRecentFirst(t *testing.T) {
	now := time.Unix(10_000, 0)
	idle := 30 * time.Minute
	conns := []ConnActivity{
		{ID: "a", LastWrite: now.Add(-2 * time.Hour)}, // idle
		{ID: "b", LastWrite: now.Add(-3 * time.Hour)}, // idle, least recent
		{ID: "c", LastWrite: now.Add(-time.Minute)},   // active
		{ID: "d", LastWrite: now.Add(-4 * time.Hour)}, // written long ago, but served here just now
	}
	seen := map[string]time.Time{"d": now.Add(-time.Second)}
	cases := []struct {
		limit  int
		evict  []string
		active int
		ok     bool
	}{
		{limit: 5, ok: true},
		{limit: 4, evict: []string{"b"}, ok: true},
		{limit: 3, evict: []string{"b", "a"}, ok: true},
		{limit: 2, active: 2, ok: false}, // c and d are active: nothing is revoked
		{limit: 1, active: 2, ok: false},
	}
	for _, tc := range cases {
		evict, active, ok := planAdmission(conns, seen, now, idle, tc.limit)
		if !slices.Equal(evict, tc.evict) || ok != tc.ok || (!ok && active != tc.active) {
			t.Errorf("limit %d: evict %v active %d ok %v; want %v %d %v", tc.limit, evict, active, ok, tc.evict, tc.active, tc.ok)
		}
	}
}

func TestConnCapRefusesNamingTheSettingAndRevokesIdle(t *testing.T) {
	now := time.Unix(10_000, 0)
	c := newConnCap(2, 30*time.Minute)
	held := []ConnActivity{{ID: "old", LastWrite: now.Add(-time.Hour)}, {ID: "new", LastWrite: now}}
	var revoked []string
	c.list = func(p string) []ConnActivity {
		if p != "alice" {
			return nil
		}
		return held
	}
	c.revoke = func(id string) { revoked = append(revoked, id) }
	if err := c.admit("alice", now); err != nil || !slices.Equal(revoked, []string{"old"}) {
		t.Fatalf("admit with one idle connection: err %v, revoked %v; want nil, [old]", err, revoked)
	}
	// The idle one was used here meanwhile: now both are active.
	revoked = nil
	c.touch("old", now)
	err := c.admit("alice", now)
	if err == nil || len(revoked) != 0 {
		t.Fatalf("admit with two active connections: err %v, revoked %v; want a refusal", err, revoked)
	}
	for _, want := range []string{`"alice"`, "limits.connections_per_principal", "at most 2", "holds 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %s", err, want)
		}
	}
	if err := c.admit("bob", now); err != nil {
		t.Errorf("bob: %v", err)
	}
	// A connection whose GET stream some node holds is active however
	// long ago its record was written.
	held = []ConnActivity{{ID: "listener", LastWrite: now.Add(-time.Hour), Streaming: true}, {ID: "new", LastWrite: now}}
	if err := c.admit("alice", now); err == nil {
		t.Errorf("a listening connection was counted idle")
	}
	if d := newConnCap(0, time.Minute); d.limit != DefaultConnectionsPerPrincipal {
		t.Errorf("default limit %d", d.limit)
	}
}
