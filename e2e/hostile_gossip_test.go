package e2e

import (
	"net"
	"strings"
	"testing"
	"time"
)

// Issue #13: each garbage gossip datagram logged an ERROR line (200
// packets, 200 lines), so anyone who can reach the gossip port could fill
// the node's log. Lines of one kind are now limited to one per 10 s.
func TestHostileGossipGarbageIsLoggedAtARate(t *testing.T) {
	bin := buildNode(t)
	a := newNodeAddrs(t)
	n := startNodeAt(t, bin, "gossip", a, 0)
	c, err := net.Dial("udp", a.Gossip)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	garbage := []byte(strings.Repeat("\xffnot a memberlist packet", 8))
	for range 200 {
		if _, err := c.Write(garbage); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // let the node read them; UDP drops what overflows
	}
	// The node has seen the packets once it logged the first of them.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(n.Log.String(), "subsystem=memberlist") {
		if time.Now().After(deadline) {
			t.Fatalf("the node logged nothing about 200 garbage datagrams:\n%s", tail(n.Log.String(), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	lines := 0
	for _, l := range strings.Split(n.Log.String(), "\n") {
		if strings.Contains(l, "subsystem=memberlist") && strings.Contains(l, "level=ERROR") {
			lines++
		}
	}
	t.Logf("200 garbage datagrams logged %d ERROR lines", lines)
	if lines > 2 {
		t.Errorf("200 garbage datagrams logged %d ERROR lines; want at most 2\n%s", lines, tail(n.Log.String(), 10))
	}
}
