package standby

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/internal/poll"
	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
)

// errUnreachable is what a cut standby's calls fail with.
var errUnreachable = errors.New("unreachable")

// localPeers are standbys served in this process: each name has its own
// Holder behind the real Service, and any of them can be cut off.
type localPeers struct {
	self    string
	mu      sync.Mutex
	svcs    map[string]*Service
	holders map[string]*Holder
	cut     map[string]bool
}

func newLocalPeers(t *testing.T, self string, standbys ...string) *localPeers {
	t.Helper()
	p := &localPeers{self: self, svcs: map[string]*Service{}, holders: map[string]*Holder{}, cut: map[string]bool{}}
	for _, name := range standbys {
		p.svcs[name], p.holders[name] = newService(t)
	}
	return p
}

func (p *localPeers) setCut(node string, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut[node] = cut
}

func (p *localPeers) Self() Candidate { return Candidate{Name: p.self} }

func (p *localPeers) Candidates() []Candidate {
	var out []Candidate
	for name := range p.svcs {
		out = append(out, Candidate{Name: name})
	}
	return out
}

func (p *localPeers) Client(node string) (standbyv1.StandbyServiceClient, error) {
	return localClient{p: p, node: node}, nil
}

// localClient calls a standby's Service directly, as the owner.
type localClient struct {
	p    *localPeers
	node string
}

func (c localClient) Hold(_ context.Context, req *standbyv1.HoldRequest, _ ...grpc.CallOption) (*standbyv1.HoldResponse, error) {
	c.p.mu.Lock()
	cut := c.p.cut[c.node]
	c.p.mu.Unlock()
	if cut {
		return nil, errUnreachable
	}
	return c.p.svcs[c.node].Hold(as(c.p.self), req)
}

func (c localClient) Release(_ context.Context, req *standbyv1.ReleaseRequest, _ ...grpc.CallOption) (*standbyv1.ReleaseResponse, error) {
	return c.p.svcs[c.node].Release(as(c.p.self), req)
}

// A standby that misses snapshots leaves the in-sync set, and the owner
// can say how far behind it is and since when; it rejoins with the next
// snapshot it acknowledges.
func TestShipperReportsHowFarAStandbyIsBehind(t *testing.T) {
	peers := newLocalPeers(t, "node1", "node2", "node3")
	now := time.Unix(1000, 0)
	var waits []time.Duration
	s := NewShipper(ShipperConfig{Replicas: 2, Peers: peers, Now: func() time.Time { return now }, Observe: func(d time.Duration) { waits = append(waits, d) }})
	ctx := context.Background()

	if out := s.Ship(ctx, "ct", 1, []byte(`{"count":1}`)); !out.Replicated() {
		t.Fatalf("both standbys reachable: outcome %+v, want replicated", out)
	}
	st, _ := s.Status("ct")
	if len(st.InSync) != 2 || st.Behind != nil {
		t.Fatalf("after a replicated snapshot: in sync %v, behind %v; want both in sync, none behind", st.InSync, st.Behind)
	}

	peers.setCut("node3", true)
	missedAt := now
	for i := 2; i <= 4; i++ {
		now = now.Add(time.Second)
		if out := s.Ship(ctx, "ct", 1, []byte(`{"count":2}`)); out.Replicated() || out.Missed["node3"] == nil {
			t.Fatalf("node3 cut off: outcome %+v, want node3 missed", out)
		}
	}
	st, _ = s.Status("ct")
	lag, ok := st.Behind["node3"]
	if len(st.InSync) != 1 || !ok {
		t.Fatalf("node3 cut off for three snapshots: in sync %v, behind %v", st.InSync, st.Behind)
	}
	if want := (Lag{Updates: 3, For: now.Sub(missedAt.Add(time.Second))}); lag != want {
		t.Fatalf("node3's lag = %+v, want %+v", lag, want)
	}
	sum := s.Summary()
	if sum.MaxLag != 3 || sum.ByInSync[1] != 1 {
		t.Fatalf("summary %+v: want max lag 3 and one session with one standby in sync", sum)
	}

	peers.setCut("node3", false)
	if out := s.Ship(ctx, "ct", 1, []byte(`{"count":5}`)); !out.Replicated() {
		t.Fatalf("node3 back: outcome %+v, want replicated", out)
	}
	st, _ = s.Status("ct")
	if len(st.InSync) != 2 || st.Behind != nil {
		t.Fatalf("node3 back: in sync %v, behind %v; want both in sync", st.InSync, st.Behind)
	}
	if len(waits) != 5 {
		t.Fatalf("observed %d acknowledgement waits, want one per ship (5)", len(waits))
	}
}

// A new epoch starts the count again: lag is measured in the snapshots of
// the owner's current epoch.
func TestShipperLagCountsTheCurrentEpoch(t *testing.T) {
	peers := newLocalPeers(t, "node1", "node2")
	s := NewShipper(ShipperConfig{Replicas: 1, Peers: peers})
	ctx := context.Background()
	s.Ship(ctx, "ct", 1, []byte(`{"count":1}`))
	s.Ship(ctx, "ct", 1, []byte(`{"count":2}`))
	peers.setCut("node2", true)
	s.Ship(ctx, "ct", 2, []byte(`{"count":3}`))
	st, _ := s.Status("ct")
	if got := st.Behind["node2"].Updates; got != 1 {
		t.Fatalf("one missed snapshot of epoch 2: lag %d, want 1", got)
	}
}

// An owner that restarts numbers its snapshots from 1 again under the
// same epoch, while its standby still holds a higher number from the run
// before: the new snapshot must replace the held one, not pass for a
// duplicate that is acknowledged without being held (the simulation lost
// writes that way: TestReplicationForksFoundStayFixed).
func TestARestartedOwnersSnapshotReplacesItsEarlierRunsCopy(t *testing.T) {
	peers := newLocalPeers(t, "node1", "node2")
	ctx := context.Background()
	before := NewShipper(ShipperConfig{Replicas: 1, Peers: peers})
	for _, snap := range []string{`{"count":1}`, `{"count":2}`, `{"count":3}`} {
		before.Ship(ctx, "ct", 1, []byte(snap))
	}

	after := NewShipper(ShipperConfig{Replicas: 1, Peers: peers}) // the owner's next run
	after.Prime("ct", 1, []byte(`{"count":3}`))
	if out := after.Ship(ctx, "ct", 1, []byte(`{"count":4}`)); !out.Replicated() {
		t.Fatalf("restarted owner's first snapshot: outcome %+v, want replicated", out)
	}
	held, ok := peers.svcs["node2"].h.Get("ct")
	if !ok || string(held.Snapshot) != `{"count":4}` {
		t.Fatalf("the standby holds %s, want the restarted owner's acknowledged snapshot {\"count\":4}", held.Snapshot)
	}
	st, _ := after.Status("ct")
	if st.Seq <= 3 {
		t.Fatalf("restarted owner numbers its snapshot %d, want above the 3 its earlier run shipped", st.Seq)
	}
}

// A standby that leaves the in-sync set stays Unconfirmed, write after
// write, until the owner confirms a record without it reached every peer:
// until then a peer may read a record naming it and let it take over
// without those writes (the simulation found it where the placement moved
// back to a restarted standby: TestReplicationForksFoundStayFixed).
func TestAStandbyLeftBehindStaysUnconfirmedUntilTheRecordIsConfirmed(t *testing.T) {
	peers := &leavingPeers{localPeers: newLocalPeers(t, "node1", "node2", "node3")}
	s := NewShipper(ShipperConfig{Replicas: 1, Peers: peers})
	ctx := context.Background()
	first := s.Ship(ctx, "ct", 1, []byte(`{"count":1}`))
	if len(first.Acked) != 1 || first.Unconfirmed != nil {
		t.Fatalf("first snapshot: outcome %+v, want one standby and nothing unconfirmed", first)
	}
	standby := first.Acked[0]

	peers.setCut(standby, true)
	peers.left = standby // no longer a candidate: the placement moves
	for i := 2; i <= 3; i++ {
		out := s.Ship(ctx, "ct", 1, []byte(`{"count":2}`))
		if !out.Replicated() || !slices.Equal(out.Unconfirmed, []string{standby}) {
			t.Fatalf("snapshot %d after the placement moved: outcome %+v, want replicated with %s unconfirmed", i, out, standby)
		}
	}
	st, _ := s.Status("ct")
	s.Confirmed("ct", st.InSync)
	if out := s.Ship(ctx, "ct", 1, []byte(`{"count":4}`)); out.Unconfirmed != nil {
		t.Fatalf("after the record was confirmed: unconfirmed %v, want none", out.Unconfirmed)
	}
}

// A standby the placement moves away from keeps its copy until the record
// that drops it is confirmed: released at once, an owner dying before its
// peers read the new record would leave that record naming a standby with
// nothing to promote. Once confirmed, it is released.
func TestAMovedStandbyIsReleasedOnlyOnceTheRecordDroppingItIsConfirmed(t *testing.T) {
	peers := &leavingPeers{localPeers: newLocalPeers(t, "node1", "node2", "node3")}
	s := NewShipper(ShipperConfig{Replicas: 1, Peers: peers})
	ctx := context.Background()
	first := s.Ship(ctx, "ct", 1, []byte(`{"count":1}`))
	if len(first.Acked) != 1 {
		t.Fatalf("first snapshot: outcome %+v, want one standby", first)
	}
	old := first.Acked[0]
	s.Confirmed("ct", first.Acked)

	peers.left = old // the placement moves
	if n := s.Rebalance(ctx); n != 1 {
		t.Fatalf("Rebalance shipped %d sessions, want 1", n)
	}
	st, _ := s.Status("ct")
	if len(st.InSync) != 1 || st.InSync[0] == old {
		t.Fatalf("after the move: in sync %v, want the other standby", st.InSync)
	}
	if got := s.Retiring(); !slices.Equal(got, []string{"ct"}) {
		t.Fatalf("Retiring = %v, want [ct]", got)
	}
	if _, held := peers.holders[old].Get("ct"); !held {
		t.Fatalf("%s released its copy before the record dropping it was confirmed", old)
	}
	s.Confirmed("ct", []string{old}) // a record published before the move
	if _, held := peers.holders[old].Get("ct"); !held || len(s.Retiring()) != 1 {
		t.Fatalf("%s released on the confirmation of a record that still names it", old)
	}

	s.Confirmed("ct", st.InSync)
	if got := s.Retiring(); len(got) != 0 {
		t.Fatalf("Retiring after the confirmation = %v, want none", got)
	}
	poll.True(t, 10*time.Second, old+" releases ct once the record dropping it is confirmed", func() bool {
		_, held := peers.holders[old].Get("ct")
		return !held
	})
}

// leavingPeers are localPeers of which one is no longer a candidate.
type leavingPeers struct {
	*localPeers
	left string
}

func (p *leavingPeers) Candidates() []Candidate {
	return slices.DeleteFunc(p.localPeers.Candidates(), func(c Candidate) bool { return c.Name == p.left })
}

// Resync brings one session's standbys up to date at once, as Rebalance
// does for all: after the placement moved, the new standby holds the last
// snapshot; when nothing changed, it ships nothing.
func TestResyncShipsOneSessionToItsCurrentPlacement(t *testing.T) {
	peers := &leavingPeers{localPeers: newLocalPeers(t, "node1", "node2", "node3")}
	s := NewShipper(ShipperConfig{Replicas: 1, Peers: peers})
	ctx := context.Background()
	if s.Resync(ctx, "ct") {
		t.Fatal("Resync shipped a session never shipped")
	}
	first := s.Ship(ctx, "ct", 1, []byte(`{"count":1}`))
	if len(first.Acked) != 1 {
		t.Fatalf("first snapshot: outcome %+v, want one standby", first)
	}
	if s.Resync(ctx, "ct") {
		t.Fatal("Resync shipped with the placement unchanged and in sync")
	}
	peers.left = first.Acked[0]
	if !s.Resync(ctx, "ct") {
		t.Fatal("Resync did not ship after the placement moved")
	}
	st, _ := s.Status("ct")
	if len(st.InSync) != 1 || st.InSync[0] == first.Acked[0] {
		t.Fatalf("after Resync: in sync %v, want the other standby", st.InSync)
	}
	if c, ok := peers.holders[st.InSync[0]].Get("ct"); !ok || string(c.Snapshot) != `{"count":1}` {
		t.Fatalf("the new standby holds %q (%t), want the last snapshot", c.Snapshot, ok)
	}
}
