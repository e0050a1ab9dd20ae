package scale

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestScaleSmoke: the harness runs a three-node swarm through every phase
// and every figure it reports is one it measured (bench/scale runs the
// large swarms).
func TestScaleSmoke(t *testing.T) {
	load := Load{Sessions: 2, Conns: 3, Clicks: 20, Churn: 10, Approvers: 1}
	res, err := Run(t.Context(), Options{N: 3, Load: load, Writes: 5, LoadFor: 500 * time.Millisecond,
		ReachEvery: 20 * time.Millisecond, ApproveFor: 200 * time.Millisecond, RestFor: 200 * time.Millisecond,
		Extra: 10, Settle: 100 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	// Every write travels to both peers and is acknowledged.
	if res.WriteMsgs < 4 || res.WriteBytes <= 0 {
		t.Errorf("a write sent %.1f messages and %.0f bytes, want at least a push and an ack per peer", res.WriteMsgs, res.WriteBytes)
	}
	if res.Reaches == 0 || res.ReachP50 <= 0 || res.ReachP99 < res.ReachP50 {
		t.Errorf("reach: %d writes, p50 %v, p99 %v", res.Reaches, res.ReachP50, res.ReachP99)
	}
	if res.CatchUp <= 0 || res.Hidden <= 0 || res.Approvals <= 0 {
		t.Errorf("catch-up %v, hidden after %v, %.0f approvals/s", res.CatchUp, res.Hidden, res.Approvals)
	}
	// Each spent state is held by its two holders, no more (the previous
	// rule held one entry per node, per node).
	if res.Approved == 0 || res.SpentHeld != 2*int(res.Approved) {
		t.Errorf("%d spent-state entries held for %d approvals, want two each", res.SpentHeld, res.Approved)
	}
	if res.Sessions != 3*load.Sessions || res.Conns < 3*load.Conns {
		t.Errorf("n1 holds %d sessions and %d connection records, want %d and at least %d", res.Sessions, res.Conns, 3*load.Sessions, 3*load.Conns)
	}
	// Each node dials each peer: two connections per pair. (The heap
	// costs of a record are too small to read reliably at this size.)
	if res.PeerConns != 4 || res.HeapPerNode <= 0 {
		t.Errorf("%.1f peer connections per node, heap per node %.0f", res.PeerConns, res.HeapPerNode)
	}
}
