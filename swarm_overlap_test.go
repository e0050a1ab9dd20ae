package mcpswarm_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpswarm "github.com/mcpswarm/mcpswarm"
)

// Faults that follow one another before the cluster settled, as the
// replication simulation's -sim.faults=seq schedules them.

// A standby is cut off, its owner moves the session to another standby and
// acknowledges more clicks there; then the owner dies and the new standby
// is cut off too, before the first one heard of the move. When the first
// one comes back it learns the dead owner's last record from the peers
// that relayed it: its copy is stale, so it does not promote, and the
// session waits for the standby that holds every acknowledged click.
func TestAStaleStandbyThatComesBackAfterItsOwnerDiedDoesNotPromote(t *testing.T) {
	staleStandbyComesBack(t, false)
}

// As above, but the standby stays cut off until its grace has forgotten the
// owner and deleted its records: it can no longer take in the owner's last
// record, which its peers still hold, and must not promote on the old one
// it kept.
func TestAStaleStandbyThatForgotItsOwnerDoesNotPromote(t *testing.T) {
	staleStandbyComesBack(t, true)
}

func staleStandbyComesBack(t *testing.T, forgot bool) {
	e := newSwarmEnv(t)
	nodes := e.cluster(5)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	acked, maybe := 3, 0
	startCounter(t, alice1, alice1, "ct", acked)
	var stale string
	eventually(t, 5*time.Second, "ct's record names a standby", func() bool {
		stale = standbyOf(t, nodes[0], "ct")
		return stale != ""
	})
	click := func() {
		switch refusal := clickNow(alice1, "ct"); {
		case refusal == "":
			acked++
		case strings.Contains(refusal, mcpswarm.ErrFenced.Error()):
			maybe++
		}
	}
	var next string
	// seeDead waits until every node in contact with the rest has seen
	// member name die: dead, or already forgotten after the grace.
	seeDead := func(name string) {
		for other, n := range e.nodes {
			if other != name && other != stale && other != next {
				eventually(t, 15*time.Second, other+" sees "+name+" dead", func() bool {
					st := mcpswarm.MemberState(n, name)
					return st == "dead" || st == ""
				})
			}
		}
	}

	e.cut(stale)
	seeDead(stale)
	eventually(t, 15*time.Second, "the owner names another standby for ct", func() bool {
		click()
		next = standbyOf(t, nodes[0], "ct")
		return next != "" && next != stale
	})
	for want := acked + 3; acked < want; {
		eventually(t, 15*time.Second, "the owner acknowledges a click with its new standby", func() bool {
			before := acked
			click()
			return acked > before
		})
	}
	for name, n := range e.nodes {
		if name != stale {
			eventually(t, 15*time.Second, name+"'s record names "+next+" as ct's standby", func() bool {
				return slices.Equal(mcpswarm.RecordedStandbys(n, "ct"), []string{next})
			})
		}
	}

	if forgot {
		eventually(t, 20*time.Second, stale+" forgets node1 after its grace", func() bool {
			return mcpswarm.MemberState(e.nodes[stale], "node1") == ""
		})
	}
	// The owner dies and the standby holding its last clicks is cut off;
	// the stale standby comes back to a majority of three out of five.
	e.cut(next)
	e.kill("node1")
	seeDead("node1")
	e.heal(stale)
	for name, n := range e.nodes {
		if name != next {
			eventually(t, 15*time.Second, name+" sees three members alive", func() bool { return n.AliveMembers() == 3 })
		}
	}
	staleConn := func() *conn {
		var c *conn
		eventually(t, 15*time.Second, stale+" serves connections again", func() bool {
			var err error
			c, err = tryConnect(t, e.nodes[stale], connOpts{token: aliceToken})
			return err == nil
		})
		return c
	}()
	if got, ok := countNow(staleConn, "ct"); ok {
		t.Fatalf("with only a stale copy in the majority, ct is served at %d (%d acknowledged)", got, acked)
	}

	e.heal(next)
	var n int
	eventually(t, 20*time.Second, "ct is served again once its last standby is back", func() bool {
		var ok bool
		n, ok = countNow(staleConn, "ct")
		return ok
	})
	if n < acked || n > acked+maybe {
		t.Fatalf("ct came back at %d after %d acknowledged clicks and %d that may have applied", n, acked, maybe)
	}
	// Every node reads the one history, including the one that was cut off.
	for name, node := range e.nodes {
		eventually(t, 15*time.Second, name+" reads ct at "+strconv.Itoa(n), func() bool {
			c, err := tryConnect(t, node, connOpts{token: aliceToken})
			if err != nil {
				return false
			}
			got, ok := countNow(c, "ct")
			return ok && got == n
		})
	}
	for name, node := range e.nodes {
		if slices.Contains(node.LocalSessions(), "ct") && name != next {
			t.Fatalf("ct runs on %s; only %s, the standby the owner last named, may promote it", name, next)
		}
	}
}

// An owner cut off from the majority keeps refusing writes after its grace
// has forgotten the members it lost: alone in its view, it must not count
// itself a majority and acknowledge on its own fsync while the majority
// serves the promoted copy.
func TestACutOffOwnerStillRefusesOnceItsGraceForgotTheOthers(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	alice3 := connect(t, nodes[2], connOpts{token: aliceToken})
	const acked = 3
	startCounter(t, alice1, alice3, "ct", acked)

	e.cut("node1")
	eventually(t, 15*time.Second, "the majority serves ct again", func() bool {
		_, ok := countNow(alice3, "ct")
		return ok
	})
	eventually(t, 20*time.Second, "node1 forgets node2 and node3 after its grace", func() bool {
		return mcpswarm.MemberState(nodes[0], "node2") == "" && mcpswarm.MemberState(nodes[0], "node3") == ""
	})
	if !slices.Contains(nodes[0].LocalSessions(), "ct") {
		t.Fatal("the cut-off owner no longer runs ct: it saw no record of the promotion, so nothing may have stopped it")
	}
	if refusal := clickNow(alice1, "ct"); refusal == "" {
		t.Fatal("the cut-off owner acknowledged a write once it had forgotten the majority")
	}
}

// An owner that crashed while the majority promoted its session restarts
// where it reaches nobody (its machine came back inside a partition). It
// remembers the members it knew, so it does not count itself alone, hence
// a majority: it acknowledges nothing for the session it restored from its
// disk, which the majority serves under a later epoch.
func TestAnOwnerRestartedAloneAcknowledgesNothing(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	alice3 := connect(t, nodes[2], connOpts{token: aliceToken})
	const acked = 3
	startCounter(t, alice1, alice3, "ct", acked)
	e.kill("node1")
	eventually(t, 15*time.Second, "ct is served again through node3", func() bool {
		_, ok := countNow(alice3, "ct")
		return ok
	})
	if res := alice3.call("ct.inc.click", nil); res.IsError {
		t.Fatalf("click after the failover: %s", textOf(res))
	}

	e.cut("node1")
	n1 := e.start("node1", nodes[1].GossipAddr())
	eventually(t, 15*time.Second, "node1 restores ct from its disk", func() bool {
		return slices.Contains(n1.LocalSessions(), "ct")
	})
	if c, err := tryConnect(t, n1, connOpts{token: aliceToken}); err == nil {
		if refusal := clickNow(c, "ct"); refusal == "" {
			t.Fatal("the owner restarted alone acknowledged a write to the session the majority took over")
		}
	}

	e.heal("node1")
	eventually(t, 20*time.Second, "the returning node1 no longer runs ct", func() bool {
		return !slices.Contains(n1.LocalSessions(), "ct")
	})
	if n, _ := countOf(t, alice3, "ct"); n != acked+1 {
		t.Fatalf("node3 reads ct at %d, want %d", n, acked+1)
	}
}
