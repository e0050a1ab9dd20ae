package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// Nodes gossip uncompressed, and still form one cluster with nodes that
// compress (the previous version, during a rolling upgrade): memberlist
// reads compressed and plain messages alike.
func TestNodesWithAndWithoutGossipCompressionFormOneCluster(t *testing.T) {
	compressing := func(c *Config) {
		c.Memberlist = func(mc *memberlist.Config) {
			LocalMemberlist(mc)
			mc.EnableCompression = true
		}
	}
	n0 := startNode(t, "n0", "")
	if n0.c.memberlistConfig().EnableCompression {
		t.Fatal("a node compresses its gossip; want it plain (a 64 KiB LZW table per message)")
	}
	n1 := startNode(t, "n1", "", joinTo(n0), compressing)
	n2 := startNode(t, "n2", "", joinTo(n1))
	nodes := []*tnode{n0, n1, n2}
	awaitMembers(t, nodes, 20*time.Second)
	if err := n1.regs["sessions"].Put("k", []byte("from the compressing node")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error { return converged(nodes, nil) })
}
