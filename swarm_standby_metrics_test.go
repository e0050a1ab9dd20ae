package mcpswarm_test

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
)

// An owner says in its metrics how its sessions are replicated: how many
// have their standbys in sync, how far the most lagging standby is behind,
// and how long writes waited for the standbys' acknowledgements.
func TestTheOwnerReportsReplicationInItsMetrics(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	const clicks = 5
	startCounter(t, alice, alice, "ct", clicks)
	eventually(t, 5*time.Second, "node1 counts ct among its sessions with one standby in sync", func() bool {
		return metricValue(t, nodes[0], `mcpswarm_standby_sessions{in_sync="1"}`) == 1
	})
	if got := metricValue(t, nodes[0], "mcpswarm_standby_lag_updates"); got != 0 {
		t.Fatalf("every standby in sync, yet the lag is %v updates", got)
	}
	// Each click saves a snapshot, and each snapshot waits for the
	// standby (the start saves one too).
	if got := metricValue(t, nodes[0], "mcpswarm_standby_ack_seconds_count"); got < clicks {
		t.Fatalf("%v acknowledgement waits observed after %d clicks", got, clicks)
	}
	if got := metricValue(t, nodes[0], "mcpswarm_standby_unreplicated_writes_total"); got != 0 {
		t.Fatalf("%v writes answered without their standby, with every standby up", got)
	}
}

// A write answered on the owner's own durability after its standby died
// is answered only once every other node's record of the session has
// dropped that standby: none of them would let it take the session over
// with a copy that lacks the write.
func TestADroppedStandbyIsUnpublishedBeforeTheWriteIsAnswered(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	startCounter(t, alice, alice, "ct", 1)
	var standby string
	eventually(t, 5*time.Second, "ct's record names a standby on every node", func() bool {
		standby = standbyOf(t, nodes[0], "ct")
		return standby != "" && slices.Equal(mcpswarm.RecordedStandbys(nodes[1], "ct"), []string{standby}) && slices.Equal(mcpswarm.RecordedStandbys(nodes[2], "ct"), []string{standby})
	})
	other := nodes[1]
	if standby == "node2" {
		other = nodes[2]
	}
	e.kill(standby)
	if res := alice.call("ct.inc.click", nil); res.IsError {
		t.Fatalf("click after the standby died: %s", textOf(res))
	}
	if got := mcpswarm.RecordedStandbys(other, "ct"); slices.Contains(got, standby) {
		t.Fatalf("the click was answered while the surviving peer's record still names the dead standby %s: %v", standby, got)
	}
}
