package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// writeAll has every node put keys in every registry, overwrite one and
// remove another; it returns the expected dump per registry.
func writeAll(t *testing.T, nodes []*tnode, perNode int) map[string]string {
	t.Helper()
	for _, n := range nodes {
		for _, reg := range testRegistries {
			r := n.regs[reg]
			for i := range perNode {
				if err := r.Put(fmt.Sprintf("k%03d", i), []byte(fmt.Sprintf("%s-%s-%d", n.name, reg, i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Put("k000", []byte("over-"+n.name)); err != nil {
				t.Fatal(err)
			}
			if err := r.Remove("k001"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The expected dump: origins sorted by their string, keys sorted.
	want := map[string]string{}
	for _, reg := range testRegistries {
		var lines []string
		for _, n := range nodes {
			var b strings.Builder
			for i := range perNode {
				switch i {
				case 0:
					fmt.Fprintf(&b, "%s k000=over-%s\n", n.c.Origin(), n.name)
				case 1:
				default:
					fmt.Fprintf(&b, "%s k%03d=%s-%s-%d\n", n.c.Origin(), i, n.name, reg, i)
				}
			}
			lines = append(lines, b.String())
		}
		want[reg] = strings.Join(sortedByOrigin(nodes, lines), "")
	}
	return want
}

func sortedByOrigin(nodes []*tnode, blocks []string) []string {
	idx := make([]int, len(nodes))
	for i := range idx {
		idx[i] = i
	}
	for i := range idx {
		for j := i + 1; j < len(idx); j++ {
			if nodes[idx[j]].c.Origin().String() < nodes[idx[i]].c.Origin().String() {
				idx[i], idx[j] = idx[j], idx[i]
			}
		}
	}
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = blocks[k]
	}
	return out
}

func TestConvergeThreeNodes(t *testing.T) { testConverge(t, memnet.New(), 3) }

func TestConvergeFiveNodes(t *testing.T) { testConverge(t, memnet.New(), 5) }

// The other tests of this package run on the in-memory network; this one
// runs the default transport, memberlist's bound to GossipAddr (TCP and
// UDP) and gRPC over TCP, so a cluster on real sockets is tested here and
// not only by the binaries in e2e.
func TestConvergeThreeNodesOnSockets(t *testing.T) { testConverge(t, nil, 3) }

func testConverge(t *testing.T, nw *memnet.Network, n int) {
	nodes := startClusterOn(t, nw, n)
	want := writeAll(t, nodes, 20)
	eventually(t, 10*time.Second, func() error { return converged(nodes, want) })
	eventually(t, 5*time.Second, func() error {
		for _, nd := range nodes {
			if !nd.c.Ready() {
				return fmt.Errorf("%s not ready", nd.name)
			}
		}
		return nil
	})
	for _, nd := range nodes {
		if got := metric(t, nd.prom, "mcpswarm_cluster_members", "state", "alive"); got != float64(n) {
			t.Errorf("%s: members{alive} = %v, want %d", nd.name, got, n)
		}
		if metric(t, nd.prom, "mcpswarm_cluster_deltas_sent_total") == 0 || metric(t, nd.prom, "mcpswarm_cluster_bytes_sent_total") == 0 {
			t.Errorf("%s: nothing counted as sent", nd.name)
		}
		if metric(t, nd.prom, "mcpswarm_cluster_deltas_received_total") == 0 || metric(t, nd.prom, "mcpswarm_cluster_bytes_received_total") == 0 {
			t.Errorf("%s: nothing counted as received", nd.name)
		}
	}
	// Every peer eventually acknowledges everything: lag 0, convergence
	// observed, anti-entropy running.
	eventually(t, 5*time.Second, func() error {
		for _, nd := range nodes {
			if lag := metric(t, nd.prom, "mcpswarm_cluster_replication_lag"); lag != 0 {
				return fmt.Errorf("%s: lag %v", nd.name, lag)
			}
			if metric(t, nd.prom, "mcpswarm_cluster_convergence_seconds") == 0 {
				return fmt.Errorf("%s: no convergence observed", nd.name)
			}
			if metric(t, nd.prom, "mcpswarm_cluster_anti_entropy_rounds_total") == 0 {
				return fmt.Errorf("%s: no anti-entropy round", nd.name)
			}
		}
		return nil
	})
}

// A node that wrote alone (it builds no replication batches then: nobody
// would receive them) hands every write to a node that joins later, and
// the writes it makes after the join stream as usual.
func TestWritesMadeAloneReachANodeThatJoinsLater(t *testing.T) {
	nw := memnet.New()
	first := startNode(t, nw, "first", "")
	for i := range 50 {
		if err := first.regs["tools"].Put(fmt.Sprintf("alone-%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	second := startNode(t, nw, "second", "", joinTo(first))
	nodes := []*tnode{first, second}
	awaitMembers(t, nodes, 10*time.Second)
	if err := first.regs["tools"].Put("together", []byte("v")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if n := second.regs["tools"].Len(); n != 51 {
			return fmt.Errorf("the joiner holds %d of the 51 entries", n)
		}
		return converged(nodes, nil)
	})
}
