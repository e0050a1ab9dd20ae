package mcpswarm_test

import (
	"testing"
	"time"
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
