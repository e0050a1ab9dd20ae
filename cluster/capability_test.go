package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// Capabilities ride in the version string of the metadata, which a
// protocol-1 node reads as any other version.
func TestCapabilitiesRoundTripInMetadata(t *testing.T) {
	m := nodeMeta{GRPCAddr: "10.0.0.7:7947", Epoch: 42, Version: "v1.4.0", Caps: NewCapabilities(PeerProtocol, DefaultCapabilities()...)}
	b, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "v1.4.0" || got.Caps.Protocol != PeerProtocol || !got.Caps.Has(CapStreamRefs) || !got.Caps.Has(CapHandoffGen) {
		t.Fatalf("decoded %+v", got)
	}
	old := nodeMeta{GRPCAddr: "10.0.0.8:7947", Epoch: 43, Version: "v1.3.0"}
	b, _ = old.encode()
	if got, err := decodeMeta(b); err != nil || got.Caps.ProtocolVersion() != 1 || len(got.Caps.Names()) != 0 || got.Version != "v1.3.0" {
		t.Fatalf("a previous-version member decoded as %+v, %v", got, err)
	}
	if _, c := splitCapabilities("v1 +peer/x:stream-refs"); c.ProtocolVersion() != 1 || c.Has(CapStreamRefs) {
		t.Fatalf("a garbled capability suffix decoded as %+v", c)
	}
}

// In a cluster mixing a previous-protocol node (it reads no stream refs)
// with current ones, a write reaches every node at push speed: senders
// give the old node deltas with names spelled out. Anti-entropy is slowed
// to 20 s so only push can converge within the bound.
func TestMixedVersionClusterReplicatesAtPushSpeed(t *testing.T) {
	slowAE := func(c *Config) { c.AntiEntropy = 20 * time.Second }
	nw := memnet.New()
	n1 := startNode(t, nw, "n1", "", slowAE)
	n2 := startNode(t, nw, "n2", "", slowAE, joinTo(n1), func(c *Config) { c.Capabilities = []string{} })
	n3 := startNode(t, nw, "n3", "", slowAE, joinTo(n1))
	nodes := []*tnode{n1, n2, n3}
	awaitMembers(t, nodes, 10*time.Second)
	for _, m := range n1.c.Members() {
		if m.Name == "n2" && m.Capabilities.Has(CapStreamRefs) {
			t.Fatalf("n2 advertises %v", m.Capabilities)
		}
		if m.Name == "n3" && !m.Capabilities.Has(CapStreamRefs) {
			t.Fatalf("n3 advertises %v", m.Capabilities)
		}
	}
	var worst time.Duration
	for round := range 5 {
		for _, from := range nodes {
			key := fmt.Sprintf("%s-%d", from.name, round)
			began := time.Now()
			if err := from.regs["sessions"].Put(key, []byte("v")); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, func() error {
				for _, n := range nodes {
					if _, ok := n.regs["sessions"].Get(from.c.Origin(), key); !ok {
						return fmt.Errorf("%s lacks %s", n.name, key)
					}
				}
				return nil
			})
			worst = max(worst, time.Since(began))
		}
	}
	t.Logf("mixed cluster: slowest of 15 writes reached all 3 nodes in %v (anti-entropy every 20 s)", worst)
	if got := metric(t, n2.prom, "mcpswarm_cluster_rejected_total", "reason", "bad stream reference"); got != 0 {
		t.Fatalf("the old node refused %v batches with stream refs", got)
	}
}
