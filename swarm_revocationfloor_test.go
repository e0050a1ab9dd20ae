package mcpswarm_test

import (
	"net/http"
	"testing"
	"time"

	mcpswarm "github.com/mcpswarm/mcpswarm"
)

// Issue #13: revocations are kept for the ids' 7-day maximum age, so a
// client that initializes and DELETEs in a loop grew every node's memory
// without bound. With --max-revocations, a node's oldest revocations give
// way to a floor: every id issued in or before the floor's second is
// refused on every node (a connection nobody DELETEd included: its client
// initializes again), ids issued later are served, and the node keeps no
// more revocations than the bound.
func TestRevocationFloorRefusesOlderIDsOnEveryNode(t *testing.T) {
	e := newSwarmEnv(t)
	e.tweak = func(c *mcpswarm.Config) { c.MaxRevocations = 2 }
	nodes := e.cluster(3)
	kept := connect(t, nodes[0], connOpts{token: aliceToken})
	issued := time.Now()
	// The revocations come in a later second than the kept connection.
	eventually(t, 2*time.Second, "the clock is past the kept connection's second", func() bool {
		return time.Now().Truncate(time.Second).After(issued)
	})
	var ended []string
	for range 3 {
		c := connect(t, nodes[1], connOpts{token: aliceToken})
		deleteConn(t, nodes[0], aliceToken, c.id)
		ended = append(ended, c.id)
	}
	var floor time.Time
	for _, n := range nodes {
		eventually(t, 10*time.Second, n.HTTPAddr()+" knows the revocation floor", func() bool {
			floor = n.Footprint().RevokedBefore
			return !floor.IsZero()
		})
	}
	if f := nodes[0].Footprint(); f.ConnsRevoked > 2 {
		t.Fatalf("node1 keeps %d revocations; the bound is 2", f.ConnsRevoked)
	}
	for _, n := range nodes {
		for _, id := range append(ended, kept.id) {
			if st := postStatus(t, n, id); st != http.StatusNotFound {
				t.Fatalf("%s answered %d for an id issued before the floor %v", n.HTTPAddr(), st, floor)
			}
		}
	}
	eventually(t, 2*time.Second, "the clock is past the floor's second", func() bool {
		return time.Now().Truncate(time.Second).After(floor)
	})
	fresh := connect(t, nodes[2], connOpts{token: aliceToken})
	for _, n := range nodes {
		if st := postStatus(t, n, fresh.id); st != http.StatusOK {
			t.Fatalf("%s answered %d for an id issued after the floor", n.HTTPAddr(), st)
		}
	}
}
