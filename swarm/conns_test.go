package swarm

import (
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

func TestConnectionKnowledgeMergesPartByPart(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	hello := mcpfront.ConnInfo{ID: "c1", Node: "node1", Principal: "alice", ProtocolVersion: "2025-11-25",
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}}

	// The home node learnt initialize; node2 later saw only a subscribe,
	// before the home node's record had reached it.
	var home, other connRecord
	stamp(&home, mcpfront.ConnInfo{}, hello, t0)
	stamp(&other, mcpfront.ConnInfo{}, mcpfront.ConnInfo{ID: "c1", Subscriptions: []string{"swarm://me"}}, t0.Add(time.Second))

	got, ok := merge([]connRecord{other, home})
	if !ok {
		t.Fatal("nothing merged")
	}
	if got.Capabilities.Elicitation == nil || got.Node != "node1" {
		t.Fatalf("a later, partial record erased what initialize taught: %+v", got)
	}
	if len(got.Subscriptions) != 1 {
		t.Fatalf("the subscription made through node2 is lost: %+v", got)
	}

	// An unsubscribe anywhere is newer than the subscribe and wins.
	stamp(&home, got, mcpfront.ConnInfo{ID: "c1", Node: "node1", Principal: "alice", ProtocolVersion: "2025-11-25",
		Capabilities: hello.Capabilities}, t0.Add(2*time.Second))
	if got, _ = merge([]connRecord{home, other}); len(got.Subscriptions) != 0 {
		t.Fatalf("an unsubscribe did not win: %+v", got)
	}

	// A revocation by any node ends it.
	if _, ok := merge([]connRecord{home, {Info: mcpfront.ConnInfo{ID: "c1"}, Revoked: true}}); ok {
		t.Fatal("a revoked connection still reads as known")
	}
}

func TestExpiredConnectionRecordsAreForgotten(t *testing.T) {
	c := newConnsState(nil)
	now := time.Now()
	c.mine["old"] = connRecord{Info: mcpfront.ConnInfo{ID: "old"}, Touched: now.Add(-8 * 24 * time.Hour)}
	c.mine["new"] = connRecord{Info: mcpfront.ConnInfo{ID: "new"}, Touched: now.Add(-time.Hour)}
	var removed []string
	c.sweepWith(now, 7*24*time.Hour, func(id string) error { removed = append(removed, id); return nil })
	if _, ok := c.mine["old"]; ok || len(removed) != 1 || removed[0] != "old" {
		t.Fatalf("after the sweep: mine %v, removed %v", c.mine, removed)
	}
	if _, ok := c.mine["new"]; !ok {
		t.Fatal("a recent record was forgotten")
	}
}

// Issue #13: a revocation keeps only the digest of the id and its time
// (18 + 8 bytes in the registry, wherever the id was long), is swept like
// any record once older than the ids' maximum age, and learns nothing
// more: a late request's client facts must not grow it back.
func TestRevocationsStaySmallAndExpire(t *testing.T) {
	c := newConnsState(nil)
	id := "s1." + strings.Repeat("A", 102) // a sealed id's length
	big := mcpfront.ConnInfo{ID: id, Principal: "alice", ClientInfo: mcp.Implementation{Name: strings.Repeat("x", 4096)}}
	c.update(id, func(r *connRecord) { stamp(r, mcpfront.ConnInfo{}, big, time.Now()) })
	c.update(id, func(r *connRecord) { *r = revoked(time.Time{}) })
	c.update(id, func(r *connRecord) { stamp(r, mcpfront.ConnInfo{}, big, time.Now()) })
	if len(c.mine) != 0 || c.ended.len() != 1 || len(c.ids) != 0 || len(c.digests) != 0 {
		t.Fatalf("after the revocation: %d live records, %d revocations, %d indexed ids; want 0, 1, 0", len(c.mine), c.ended.len(), len(c.ids))
	}
	k := revocationOf(id)
	if !c.dirty[id] || !c.dirty[k.regKey()] {
		t.Fatalf("dirty %v: want the live record's removal and the revocation published", c.dirty)
	}
	c.mu.Lock()
	v, own, err := c.ownEntryLocked(k.regKey())
	_, ownLive, _ := c.ownEntryLocked(id)
	c.mu.Unlock()
	if err != nil || !own || ownLive {
		t.Fatalf("own entries: revocation %v (%v), live record %v; want only the revocation", own, err, ownLive)
	}
	if entry := len(k.regKey()) + len(v); entry > 26 {
		t.Fatalf("a revocation is %d bytes of key and value; want at most 26", entry)
	}
	if r, _ := c.mineLocked(id); !r.Revoked {
		t.Fatal("the id does not read as revoked")
	}
	if _, ok := c.Get(id); ok || !c.Revoked(id) {
		t.Fatal("a revoked connection reads as known")
	}
	now := time.Now()
	gone := revocationOf("gone-old")
	c.ended.put(gone, revTimeOf(now.Add(-8*24*time.Hour).UnixNano()))
	var removed []string
	c.sweepWith(now, 7*24*time.Hour, func(key string) error { removed = append(removed, key); return nil })
	if c.ended.has(gone) || len(removed) != 1 || removed[0] != gone.regKey() {
		t.Fatalf("after the sweep: %d revocations, removed %v", c.ended.len(), removed)
	}
	if !c.ended.has(k) {
		t.Fatal("a recent revocation was forgotten")
	}
}

// A revocation lives in its revoker's partition only; when that partition
// goes while the id is still valid (its node died or restarted), this node
// takes the revocation into its own, with the original time. One removed
// at its expiry is not copied, so nodes never copy each other's back. A
// previous version's revocation (a revoked record under the id) is taken
// over the same way, in the new form.
func TestARevocationLeavingAnotherPartitionIsKeptHere(t *testing.T) {
	maxAge := 7 * 24 * time.Hour
	c := newConnsState(&Swarm{connMaxAge: maxAge})
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	k1 := revocationOf("c1")
	c.elsewhere.put(k1, struct{}{})
	c.lostRevocation(k1, at.UnixNano())
	if got, ok := c.ended.get(k1); !ok || got.nanos() != at.UnixNano() || !c.dirty[k1.regKey()] {
		t.Fatalf("a valid revocation that left another partition: ended %v, dirty %v; want it kept with its time and published", c.ended.has(k1), c.dirty)
	}
	if !c.Revoked("c1") {
		t.Fatal("the id reads as not revoked")
	}
	k2 := revocationOf("c2")
	c.elsewhere.put(k2, struct{}{})
	c.lostRevocation(k2, time.Now().Add(-maxAge+time.Second).UnixNano())
	if c.ended.has(k2) {
		t.Fatal("a revocation removed at its expiry was copied")
	}
	if c.elsewhere.has(k2) {
		t.Fatal("an expired revocation is still known")
	}
}

// A revocation key names only its own digest: a live id's key, a key of
// another shape or a digest of the wrong length is not a revocation.
func TestRevocationKeysRoundTrip(t *testing.T) {
	k := revocationOf("s1.some-id")
	if got, ok := parseRevKey(k.regKey()); !ok || got != k {
		t.Fatalf("parseRevKey(%q) = %x, %v", k.regKey(), got, ok)
	}
	for _, key := range []string{"s1.some-id", "r:", "r:AAAA", k.regKey() + "A", "r:" + strings.Repeat("!", 16)} {
		if _, ok := parseRevKey(key); ok {
			t.Errorf("parseRevKey(%q) read a revocation", key)
		}
	}
	if at, ok := decodeRevocation(encodeRevocation(-5)); !ok || at != -5 {
		t.Fatalf("a revocation's time round-trips to %d, %v", at, ok)
	}
	if _, ok := decodeRevocation([]byte(`{"revoked":true}`)); ok {
		t.Fatal("a JSON record read as a revocation's time")
	}
}
