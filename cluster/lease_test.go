package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// TestCutOffPeerRefusesOnceAWriteIsAnswered: a write whose acknowledgement
// a cut-off peer missed is answered only once that peer's lease has
// lapsed, so at that moment the peer already refuses (InSync fails); it is
// in sync again once healed and caught up, and then holds the write.
func TestCutOffPeerRefusesOnceAWriteIsAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a peer off and waits for leases and memberlist's verdicts on wall time")
	}
	nodes := startCluster(t, 3, func(c *Config) { c.DeadGrace = time.Minute })
	n0, n2 := nodes[0], nodes[2]
	reg := n0.regs["sessions"]
	// Every link is up, both ways, and carries writes: a link still
	// opening holds no lease, and then nobody waits or refuses for it.
	warmLinks(t, nodes, func(ctx context.Context, n *tnode) error { return n.regs["sessions"].AwaitPeers(ctx) })

	n2.net.Cut(n2.name, true)
	if err := reg.Put("conn", []byte("revoked")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	start := time.Now()
	err := reg.AwaitPeers(ctx)
	cancel()
	answered := time.Since(start)
	// n2 is either still alive to n0 (then the wait times out naming it)
	// or already suspect (its link failed; it is not waited for): in both
	// cases the write is answered only once n2's lease has lapsed.
	var lag *LaggingError
	if err != nil && !errors.As(err, &lag) {
		t.Fatalf("AwaitPeers = %v, want nil or a LaggingError naming n2", err)
	}
	// The moment the write is answered, the cut-off node must refuse: it
	// has not got the write.
	if _, ok := n2.regs["sessions"].Get(n0.c.Origin(), "conn"); ok {
		t.Fatal("n2 got the write across the partition")
	}
	var behind *BehindError
	if err := n2.c.InSync(); !errors.As(err, &behind) || behind.RetryAfter() <= 0 {
		t.Fatalf("n2.InSync() = %v right after the write was answered, want a BehindError with a retry", err)
	}
	t.Logf("write answered after %v (%v); n2: %v", answered.Round(time.Millisecond), err, behind)

	n2.net.Cut(n2.name, false)
	healed := time.Now()
	awaitMembers(t, nodes, 20*time.Second)
	// In sync with n0 alive: memberlist may still declare n0 dead once
	// more after the heal (a suspicion timer started during the cut), and
	// n2 is then in sync at once (it pulls from n1 at the death) while it
	// hides n0's entries.
	eventually(t, 20*time.Second, func() error {
		if m, _ := n2.c.Member("n0"); m.State != StateAlive {
			return fmt.Errorf("n2 sees n0 %s", m.State)
		}
		return n2.c.InSync()
	})
	if _, ok := n2.regs["sessions"].Get(n0.c.Origin(), "conn"); !ok {
		t.Fatal("n2 is in sync again but lacks the write")
	}
	t.Logf("n2 in sync again %v after healing", time.Since(healed).Round(time.Millisecond))
}

// TestKilledPeerLeavesTheMajorityServing: one node of three is killed; its
// port refuses connections, so the two others know it is gone (not cut
// off) and go on.
func TestKilledPeerLeavesTheMajorityServing(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a peer and waits for memberlist's verdict on wall time")
	}
	nodes := startCluster(t, 3, func(c *Config) { c.DeadGrace = time.Minute })
	awaitMembers(t, nodes, 10*time.Second)
	eventually(t, 10*time.Second, func() error { return nodes[0].c.InSync() })
	killed := time.Now()
	nodes[2].kill()
	// The survivors' leases on it were running when its port started
	// refusing: they need nothing more from it and keep serving, every
	// moment until memberlist's verdict on it and after.
	eventually(t, 10*time.Second, func() error {
		for _, n := range nodes[:2] {
			if err := n.c.InSync(); err != nil {
				t.Fatalf("%s refuses %v after the kill: %v", n.name, time.Since(killed).Round(time.Millisecond), err)
			}
		}
		if m, _ := nodes[0].c.Member(nodes[2].name); m.State.live() && m.State != StateSuspect {
			return fmt.Errorf("n0 still sees %s %s", nodes[2].name, m.State)
		}
		return nil
	})
	t.Logf("n0's verdict on %s %v after the kill", nodes[2].name, time.Since(killed).Round(time.Millisecond))
	for _, n := range nodes[:2] {
		eventually(t, 5*time.Second, func() error { return n.c.InSync() })
	}
}

// TestLoneNodeIsInSync: no peer, nothing to miss.
func TestLoneNodeIsInSync(t *testing.T) {
	n := startNode(t, memnet.New(), "solo", "")
	if err := n.c.InSync(); err != nil {
		t.Fatal(err)
	}
}

// TestSilentDeathCatchesUpAtOnce: one node of three falls silent (its
// packets dropped, nothing refused), so the two others cannot tell its
// death from their own isolation: once memberlist declares it dead they
// may go on only after pulling everything from each other. They pull as
// soon as the death is declared and their lease on it has lapsed, not at
// the next anti-entropy round (an hour away here).
func TestSilentDeathCatchesUpAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a node off and waits for memberlist's verdict on wall time")
	}
	nodes := startCluster(t, 3, func(c *Config) {
		c.DeadGrace = time.Minute
		c.AntiEntropy = time.Hour
		c.AntiEntropyQuiet = time.Hour
	})
	nw := nodes[0].net
	for _, n := range nodes[:2] {
		eventually(t, 10*time.Second, func() error { return n.c.InSync() })
	}
	nw.Cut("n2", true)
	for _, n := range nodes[:2] {
		eventually(t, 15*time.Second, func() error {
			if m, _ := n.c.Member("n2"); m.State != StateDead {
				return fmt.Errorf("%s sees n2 %s", n.name, m.State)
			}
			return nil
		})
	}
	dead := time.Now()
	for _, n := range nodes[:2] {
		eventually(t, 5*time.Second, func() error { return n.c.InSync() })
	}
	t.Logf("both survivors in sync %v after seeing n2 dead", time.Since(dead).Round(time.Millisecond))
	// Healed, so no probe of the silent node outlives the test.
	nw.Cut("n2", false)
	awaitMembers(t, nodes, 20*time.Second)
}

// TestWriteWaitsForTheLeaseOnTheClusterClock: the lease arithmetic runs on
// the cluster's clock, so it is tested to the tick. A write a cut-off peer
// missed is not answered while that peer may still hold a lease on the
// writer (until lease plus margin after the writer's last message to it),
// and is answered once the clock passes that instant; the peer then
// refuses. memberlist has no clock hook and keeps wall time on the
// in-memory network: the cut is noticed on wall time, every lease instant
// is the fake clock's, advanced by the test.
func TestWriteWaitsForTheLeaseOnTheClusterClock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for memberlist to notice a cut, on wall time")
	}
	clock := clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0))
	nodes := startCluster(t, 3, func(c *Config) { c.Clock = clock; c.DeadGrace = time.Minute })
	n0, n2 := nodes[0], nodes[2]
	reg := n0.regs["sessions"]
	// Acknowledged by every peer (awaitAcked: AwaitPeers would then wait
	// for lapses on a clock that does not move).
	warmLinks(t, nodes, func(ctx context.Context, n *tnode) error {
		return n.c.repl.awaitAcked(ctx, "sessions", n.regs["sessions"].seq(n.c.Origin()))
	})

	start := clock.Now()
	n2.net.Cut(n2.name, true)
	if err := reg.Put("conn", []byte("revoked")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		answered <- reg.AwaitPeers(ctx)
	}()
	// The writer stops waiting for n2's acknowledgement once memberlist
	// (wall time) no longer counts n2 alive; from then on it waits for
	// the lease alone, on the fake clock, which has not moved.
	eventually(t, 20*time.Second, func() error {
		if m, _ := n0.c.Member("n2"); m.State == StateAlive {
			return fmt.Errorf("n0 still counts n2 alive")
		}
		return nil
	})
	lapse := n0.cfg.Lease + leaseMargin
	clock.Advance(lapse - time.Millisecond)
	select {
	case err := <-answered:
		t.Fatalf("the write was answered (%v) %v after the cut on the cluster clock, before n2's lease of %v could lapse", err, clock.Since(start), lapse)
	default:
	}
	// Past the instant (later still if a heartbeat to n2 went out after
	// the cut and renewed what n2 may believe): the write is answered.
	var err error
	eventually(t, 20*time.Second, func() error {
		select {
		case err = <-answered:
			return nil
		default:
			clock.Advance(50 * time.Millisecond)
			return fmt.Errorf("not answered %v after the cut on the cluster clock", clock.Since(start))
		}
	})
	var lag *LaggingError
	if err != nil && !errors.As(err, &lag) {
		t.Fatalf("AwaitPeers = %v, want nil or a LaggingError naming n2", err)
	}
	if _, ok := n2.regs["sessions"].Get(n0.c.Origin(), "conn"); ok {
		t.Fatal("n2 got the write across the partition")
	}
	var behind *BehindError
	if err := n2.c.InSync(); !errors.As(err, &behind) {
		t.Fatalf("n2.InSync() = %v once the write was answered, want a BehindError", err)
	}
	t.Logf("answered %v after the cut on the cluster clock (lease %v + margin %v)", clock.Since(start), n0.cfg.Lease, leaseMargin)
}

// warmLinks writes on every node and waits until acked says each node's
// write reached its peers and every node is in sync.
func warmLinks(t *testing.T, nodes []*tnode, acked func(context.Context, *tnode) error) {
	t.Helper()
	for _, n := range nodes {
		if err := n.regs["sessions"].Put("warm-"+n.name, []byte("up")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := acked(ctx, n)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		for _, n := range nodes {
			if err := n.c.InSync(); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		return nil
	})
}

// TestANodeBackFromAPartitionKnowsWhatItForgotIsOutdated: n2 is cut off
// until its grace has forgotten n0 and n1 and deleted their entries;
// meanwhile n0 writes (n1 holds the write) and dies. Back, n2 counts n0
// lost: it is in sync only once it has pulled from n1, and by then it
// knows that n1 holds writes of n0 it kept no copy of and no longer takes
// in (Outdated), so nothing it kept of n0 may drive a failover.
func TestANodeBackFromAPartitionKnowsWhatItForgotIsOutdated(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a node off past its grace and waits for memberlist's verdicts on wall time")
	}
	nodes := startCluster(t, 3, func(c *Config) {
		c.DeadGrace = time.Minute
		if c.Name == "n2" {
			c.DeadGrace = time.Second
		}
		// Only the pull a new link makes can catch n2 up.
		c.AntiEntropy = time.Hour
		c.AntiEntropyQuiet = time.Hour
	})
	n0, n1, n2 := nodes[0], nodes[1], nodes[2]
	warmLinks(t, nodes, func(ctx context.Context, n *tnode) error { return n.regs["sessions"].AwaitPeers(ctx) })

	n2.net.Cut(n2.name, true)
	eventually(t, 20*time.Second, func() error {
		if lost := n2.c.Lost(); !slices.Equal(lost, []string{"n0", "n1"}) {
			return fmt.Errorf("n2 counts %v lost", lost)
		}
		return nil
	})
	if err := n0.regs["sessions"].Put("k", []byte("after the cut")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if _, ok := n1.regs["sessions"].Get(n0.c.Origin(), "k"); !ok {
			return errors.New("n1 lacks n0's write")
		}
		return nil
	})
	n0.kill()
	eventually(t, 10*time.Second, func() error {
		if m, _ := n1.c.Member("n0"); m.State.live() {
			return fmt.Errorf("n1 sees n0 %s", m.State)
		}
		return nil
	})

	n2.net.Cut(n2.name, false)
	eventually(t, 20*time.Second, func() error {
		err := n2.c.InSync()
		if err == nil && !n2.c.Outdated("n0") {
			t.Fatal("n2 is in sync again without knowing that n1 holds later writes of n0")
		}
		return err
	})
	if n2.c.Outdated("n1") {
		t.Fatal("n2 counts n1, heard from again, outdated")
	}
}
