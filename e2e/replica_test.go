package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The loss of the owner's machine loses no acknowledged write: three real
// nodes, eight counter sessions owned by node1, each clicked continuously
// through node3 by its own client; node1 is killed -9 and its data dir
// deleted, never to return. Every session is served again through node2
// and node3 with its id and tool names, holding every acknowledged click
// and at most the ones whose answer never came; every failed call's answer
// is retryable. Failover time (the loss to each session's first
// acknowledged click) is logged as p50 and max.
//
// On loopback the dead node's closed ports tell the others at once. In
// network namespaces with the Kubernetes manifest's timers (LAN, and its
// --probe-interval), node1's link is cut before the kill, as when a
// machine loses power: nothing answers, and only memberlist's verdict
// ends the wait.
func TestOwnerMachineLossLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes and kills one")
	}
	t.Run("loopback", func(t *testing.T) {
		c := newReplicaCluster(t)
		loseOwnerMachine(t, c, c.nodes[0].kill)
	})
	t.Run("lan", func(t *testing.T) {
		lab := newNetLab(t, 3)
		c := startLANReplicaCluster(t, lab)
		loseOwnerMachine(t, c, func() {
			lab.cut(1, false)
			c.nodes[0].kill()
		})
	})
}

// loseOwnerMachine runs TestOwnerMachineLossLosesNoAcknowledgedWrite on c;
// lose takes node1 down.
func loseOwnerMachine(t *testing.T, c *replicaCluster, lose func()) {
	ids := c.startCounters(0, "lost", 8)
	via3 := dialMCP(t, c.nodes[2].BaseURL())
	defer via3.Close()
	tools := map[string][]string{}
	epochs := map[string]uint64{}
	for _, id := range ids {
		s, err := c.session(t.Context(), 2, id)
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = s.GetEpoch()
	}

	ks, stop := c.clickers(2, ids)
	awaitAcked(t, ks, 20, 20*time.Second)
	for _, id := range ids { // a counter above 0 has its reset tool too
		tools[id] = toolsOf(t, via3, id)
	}
	killed := time.Now()
	lose()
	for _, k := range ks { // an answer from now on comes from a new owner
		k.mark.Store(time.Now().UnixNano())
	}
	if err := os.RemoveAll(c.nodes[0].DataDir); err != nil {
		t.Fatal(err)
	}
	awaitAcked(t, ks, 20, 60*time.Second)
	stop()

	var failover []time.Duration
	for _, k := range ks {
		if len(tools[k.id]) == 0 {
			t.Fatalf("node3 listed no tools of %s before the loss", k.id)
		}
		failover = append(failover, time.Duration(k.back.Load()-killed.UnixNano()))
	}
	via2 := dialMCP(t, c.nodes[1].BaseURL())
	defer via2.Close()
	for _, k := range ks {
		for i, via := range []*mcpClient{via2, via3} {
			n, err := countVia(via, k.id)
			if err != nil {
				t.Fatalf("reading %s through node%d after the failover: %v", k.id, i+2, err)
			}
			checkCount(t, k, fmt.Sprintf("node%d", i+2), n)
			if got := toolsOf(t, via, k.id); !slices.Equal(got, tools[k.id]) {
				t.Errorf("node%d lists %s's tools as %v, before the loss %v", i+2, k.id, got, tools[k.id])
			}
		}
		for i := 1; i < 3; i++ {
			s, err := c.session(t.Context(), i, k.id)
			if err != nil {
				t.Fatal(err)
			}
			if s.GetOwnerNode() == "node1" || s.GetEpoch() <= epochs[k.id] {
				t.Errorf("node%d lists %s owned by %s at epoch %d (epoch %d before the loss)", i+1, k.id, s.GetOwnerNode(), s.GetEpoch(), epochs[k.id])
			}
		}
	}
	kinds, bad := failureKinds(ks)
	var acked, maybe, refused int64
	for _, k := range ks {
		acked, maybe, refused = acked+k.acked.Load(), maybe+k.maybe.Load(), refused+k.refused.Load()
	}
	for text, n := range kinds {
		t.Logf("%d× %s", n, text)
	}
	for _, f := range bad {
		t.Errorf("a failed call's answer does not say to retry: %s", f)
	}
	promoted := c.promotions(killed, ids)
	if dead, ok := firstLogged(c.nodes[1], killed, `"msg":"member dead"`, `"member":"node1@`); ok {
		t.Logf("node2 declared node1 dead %v after the loss", dead.Round(time.Millisecond))
	}
	t.Logf("owner machine lost: %d clicks acknowledged, 0 lost; %d failed calls may have applied, %d said they did not; promoted after p50 %v, max %v; failover p50 %v, max %v",
		acked, maybe, refused, percentile(promoted, 50).Round(time.Millisecond), percentile(promoted, 100).Round(time.Millisecond),
		percentile(failover, 50).Round(time.Millisecond), percentile(failover, 100).Round(time.Millisecond))
}

// The owner killed -9 comes back from its old data after a standby took
// its sessions over: it demotes itself (logs "demoted"), never lists its
// old copies as its own nor serves their old counts, and every node then
// answers the one history.
func TestReturningOwnerServesOnlyTheOneHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes, kills one and restarts it")
	}
	c := newReplicaCluster(t)
	ids := c.startCounters(0, "back", 4)
	ks, stop := c.clickers(2, ids)
	awaitAcked(t, ks, 20, 20*time.Second)
	c.nodes[0].kill()
	awaitAcked(t, ks, 20, 60*time.Second) // every session failed over

	// node1 restarts from the data it had while the clicks go on; what
	// it lists and answers is checked from its first answer on.
	floor := map[string]int64{}
	for _, k := range ks {
		floor[k.id] = k.acked.Load()
	}
	c.nodes[0].start(c.nodes[1].Gossip)
	via1 := c.nodes[0]
	if _, err := via1.await(30*time.Second, via1.isReady); err != nil {
		t.Fatal(err)
	}
	cl1 := dialMCP(t, via1.BaseURL())
	defer cl1.Close()
	demoted := func(context.Context) error {
		for _, id := range ids {
			if !loggedLine(via1, "demoted", `"session":"`+id+`"`) {
				return fmt.Errorf("node1 has not logged demoting %s", id)
			}
		}
		return nil
	}
	if _, err := via1.await(30*time.Second, func(ctx context.Context) error {
		for _, id := range ids {
			if s, err := c.session(ctx, 0, id); err == nil && s.GetOwnerNode() == "node1" {
				t.Errorf("the returning node1 lists %s as its own (epoch %d)", id, s.GetEpoch())
			}
			if n, err := countVia(cl1, id); err == nil && n < floor[id] {
				t.Errorf("the returning node1 answered %s's count %d, below the %d clicks acknowledged before it came back: its old copy", id, n, floor[id])
			}
		}
		if t.Failed() {
			return nil
		}
		return demoted(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	awaitAcked(t, ks, 10, 30*time.Second)
	stop()
	for _, k := range ks {
		var counts []int64
		for i := range c.nodes {
			counts = append(counts, c.awaitCount(i, k.id))
		}
		if counts[0] != counts[1] || counts[1] != counts[2] {
			t.Errorf("%s reads %v through node1, node2, node3: not one history", k.id, counts)
		}
		checkCount(t, k, "node1", counts[0])
		s, err := c.session(t.Context(), 0, k.id)
		if err != nil {
			t.Fatal(err)
		}
		if s.GetOwnerNode() == "node1" {
			t.Errorf("node1 owns %s again", k.id)
		}
	}
	_, bad := failureKinds(ks)
	for _, f := range bad {
		t.Errorf("a failed call's answer does not say to retry: %s", f)
	}
}

// loggedLine reports whether one line of m's log contains every part.
func loggedLine(m *member, parts ...string) bool {
	for _, line := range strings.Split(m.Log.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// standbyWindow bounds how long after a standby's kill -9 the owner may
// refuse writes: until the standby is known down (its closed port, at
// once on one machine; memberlist's verdict otherwise).
const standbyWindow = 5 * time.Second

// A standby killed -9 does not stop its owner: clicks sent to the owner
// keep being acknowledged, with failures (each retryable) only within
// standbyWindow of the kill; the owner places a new standby on the third
// node, restoring R, and loses nothing.
func TestStandbyLossKeepsTheOwnerServing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes and kills one")
	}
	c := newReplicaCluster(t)
	ids := c.startCounters(0, "sb", 4)
	first, err := c.session(t.Context(), 0, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	victim := first.GetStandbys()[0]
	survivor := map[string]string{"node2": "node3", "node3": "node2"}[victim]
	if survivor == "" {
		t.Fatalf("%s's standby is %q, not node2 or node3", ids[0], victim)
	}
	var held []string // the sessions the victim is a standby of
	for _, id := range ids {
		s, err := c.session(t.Context(), 0, id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(s.GetStandbys(), victim) {
			held = append(held, id)
		}
	}

	ks, stop := c.clickers(0, ids)
	awaitAcked(t, ks, 20, 20*time.Second)
	killed := time.Now()
	c.nodes[map[string]int{"node2": 1, "node3": 2}[victim]].kill()
	// R is restored: every session the victim held names the survivor.
	took, err := c.nodes[0].await(30*time.Second, func(ctx context.Context) error {
		for _, id := range held {
			s, err := c.session(ctx, 0, id)
			if err != nil {
				return err
			}
			if !slices.Equal(s.GetStandbys(), []string{survivor}) {
				return fmt.Errorf("%s's standbys are %v, want [%s]", id, s.GetStandbys(), survivor)
			}
		}
		return nil
	})
	if err != nil {
		for _, k := range ks {
			t.Logf("%s: %d acknowledged; last failures %v", k.id, k.acked.Load(), lastOf(k.failures(), 3))
		}
		t.Fatal(err)
	}
	// The owner serves on: 20 more clicks each, whatever the window was.
	awaitAcked(t, ks, 20, 30*time.Second)
	stop()

	var last time.Time
	for _, k := range ks {
		for _, f := range k.failures() {
			if f.at.Before(killed) || f.at.After(killed.Add(standbyWindow)) {
				t.Errorf("%s failed outside the %v after the standby's kill: %s", k.id, standbyWindow, f)
			}
			if f.at.After(last) {
				last = f.at
			}
		}
		checkCount(t, k, "node1", c.awaitCount(0, k.id))
	}
	kinds, bad := failureKinds(ks)
	for text, n := range kinds {
		t.Logf("%d× %s", n, text)
	}
	for _, f := range bad {
		t.Errorf("a failed call's answer does not say to retry: %s", f)
	}
	window := time.Duration(0)
	if !last.IsZero() {
		window = last.Sub(killed)
	}
	t.Logf("standby %s killed: %d of %d sessions held there; %d failed calls, the last %v after the kill; %s placed as the new standby %v after it",
		victim, len(held), len(ids), sum(kinds), window.Round(time.Millisecond), survivor, took.Round(time.Millisecond))
}

// sum adds a map's values.
func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
