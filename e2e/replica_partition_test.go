package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// backdoor gives the test a link of its own into node i's namespace, apart
// from the bridge: a veth with a host route each way, so the test still
// reaches node i (and its clients keep clicking there) while cut isolates
// it from the other nodes.
func (l *netLab) backdoor(i int) {
	l.t.Helper()
	in, out := l.link("c", i), l.link("d", i)
	l.ip("link", "add", in, "type", "veth", "peer", "name", out)
	l.t.Cleanup(func() { l.ipQuiet("link", "del", in) })
	l.ip("link", "set", out, "netns", l.ns(fmt.Sprint(i)))
	l.ip("link", "set", in, "up")
	l.ip("-n", l.ns(fmt.Sprint(i)), "link", "set", out, "up")
	l.ip("route", "add", l.addr(i)+"/32", "dev", in, "src", l.subnet+"254")
	l.ip("-n", l.ns(fmt.Sprint(i)), "route", "add", l.subnet+"254/32", "dev", out)
}

// ipQuiet runs ip(8) ignoring the outcome (a cleanup of what may be gone).
func (l *netLab) ipQuiet(args ...string) { _ = exec.Command("ip", args...).Run() }

// A partition isolating the owner while clients click on both sides: four
// counter sessions owned by node1, each clicked through node1 (the
// minority) and through node2 (the majority). Once node1 is cut off it
// acknowledges no click sent after the cut (they fail, retryably), the
// majority promotes the standbys and serves every session again; after
// the heal node1 demotes its copies and every node reads one history that
// holds every click acknowledged on either side and at most those whose
// answer never came. Real processes in network namespaces, with the
// Kubernetes manifest's timers (LAN, and its --probe-interval).
func TestPartitionedOwnerStopsAndTheMajorityTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes in network namespaces")
	}
	lab := newNetLab(t, 3)
	lab.backdoor(1)
	c := startLANReplicaCluster(t, lab)
	ids := c.startCounters(0, "part", 4)
	minority, stopMinority := c.clickers(0, ids)
	majority, stopMajority := c.clickers(1, ids)
	all := append(append([]*repClicker(nil), minority...), majority...)
	awaitAcked(t, all, 10, 30*time.Second)

	lab.cut(1, false)
	cut := time.Now()
	for _, k := range all {
		k.mark.Store(cut.UnixNano())
	}
	// The majority serves every session again; the minority keeps trying.
	awaitAcked(t, majority, 10, 60*time.Second)
	for _, id := range ids {
		if _, err := c.nodes[1].await(10*time.Second, func(ctx context.Context) error {
			s, err := c.session(ctx, 1, id)
			if err != nil {
				return err
			}
			if s.GetOwnerNode() == "node1" {
				return fmt.Errorf("%s is still owned by node1", id)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.nodes[0].await(30*time.Second, func(context.Context) error {
		for _, k := range minority {
			if len(k.failures()) < 3 {
				return fmt.Errorf("%s has failed %d clicks through node1 since the cut", k.id, len(k.failures()))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range minority {
		if n := k.ackedSentAfter.Load(); n > 0 {
			t.Errorf("the cut-off node1 acknowledged %d clicks of %s sent after the cut", n, k.id)
		}
	}
	var failover []time.Duration
	for _, k := range majority {
		failover = append(failover, time.Duration(k.back.Load()-cut.UnixNano()))
	}
	if percentile(failover, 100) > 15*time.Second {
		// Seen once in ten runs (36 s): say why, for whoever looks next.
		for _, m := range c.nodes[1:] {
			t.Logf("slow failover; cluster log of %s:\n%s", m.Name, clusterLines(m.Log.String()))
		}
	}
	if loggedLine(c.nodes[0], "promoted") {
		t.Error("the cut-off node1 promoted a copy")
	}

	lab.cut(1, true)
	took, err := c.nodes[0].await(60*time.Second, func(context.Context) error {
		for _, id := range ids {
			if !loggedLine(c.nodes[0], "demoted", `"session":"`+id+`"`) {
				return fmt.Errorf("node1 has not logged demoting %s", id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	awaitAcked(t, minority, 5, 30*time.Second) // node1 now forwards to the new owners
	stopMinority()
	stopMajority()

	for i, id := range ids {
		var counts []int64
		for n := range c.nodes {
			counts = append(counts, c.awaitCount(n, id))
		}
		if counts[0] != counts[1] || counts[1] != counts[2] {
			t.Errorf("%s reads %v through node1, node2, node3: not one history", id, counts)
		}
		acked := minority[i].acked.Load() + majority[i].acked.Load()
		maybe := minority[i].maybe.Load() + majority[i].maybe.Load()
		if counts[1] < acked || counts[1] > acked+maybe {
			t.Errorf("%s counts %d, want between the %d clicks acknowledged on both sides and %d more that may have applied", id, counts[1], acked, maybe)
		}
	}
	kinds, bad := failureKinds(all)
	for text, n := range kinds {
		t.Logf("%d× %s", n, text)
	}
	for _, f := range bad {
		t.Errorf("a failed call's answer does not say to retry: %s", f)
	}
	promoted := c.promotions(cut, ids)
	if dead, ok := firstLogged(c.nodes[1], cut, `"msg":"member dead"`, `"member":"node1@`); ok {
		t.Logf("node2 declared node1 dead %v after the cut", dead.Round(time.Millisecond))
	}
	t.Logf("owner cut off: the majority promoted the standbys after p50 %v, max %v, and served every session again after p50 %v, max %v; node1 demoted its copies %v after the heal",
		percentile(promoted, 50).Round(time.Millisecond), percentile(promoted, 100).Round(time.Millisecond),
		percentile(failover, 50).Round(time.Millisecond), percentile(failover, 100).Round(time.Millisecond), took.Round(time.Millisecond))
	for _, m := range c.nodes {
		m.stop()
	}
}

// clusterLines keeps the log lines of membership, leases and promotions.
func clusterLines(log string) string {
	var b strings.Builder
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"component":"cluster"`) || strings.Contains(line, "promoted") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
