package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// Nodes gossip uncompressed, and still form one cluster with nodes that
// compress (the previous version, during a rolling upgrade): memberlist
// reads compressed and plain messages alike.
func TestNodesWithAndWithoutGossipCompressionFormOneCluster(t *testing.T) {
	compressing := func(c *Config) {
		timers := c.Memberlist
		c.Memberlist = func(mc *memberlist.Config) {
			timers(mc)
			mc.EnableCompression = true
		}
	}
	nw := memnet.New()
	// What the cluster chose, seen by the hook that runs after it (true
	// until the hook has run, so a hook never called cannot pass).
	compresses := true
	observe := func(c *Config) {
		timers := c.Memberlist
		c.Memberlist = func(mc *memberlist.Config) {
			compresses = mc.EnableCompression
			timers(mc)
		}
	}
	n0 := startNode(t, nw, "n0", "", observe)
	if compresses {
		t.Fatal("a node compresses its gossip; want it plain (a 64 KiB LZW table per message)")
	}
	n1 := startNode(t, nw, "n1", "", joinTo(n0), compressing)
	n2 := startNode(t, nw, "n2", "", joinTo(n1))
	nodes := []*tnode{n0, n1, n2}
	awaitMembers(t, nodes, 20*time.Second)
	if err := n1.regs["sessions"].Put("k", []byte("from the compressing node")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error { return converged(nodes, nil) })
}
