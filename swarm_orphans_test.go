package mcpswarm_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Issue #13: without tokens, each connection is its own principal
// ("conn:<id>"), and its sessions outlived its DELETE as orphans nobody
// could reach. They now stop once any node has ended the connection.
func TestSessionsOfAnEndedAnonymousConnectionStop(t *testing.T) {
	if testing.Short() {
		t.Skip("two nodes on sockets and wall time")
	}
	e := newSwarmEnv(t)
	e.policy = filepath.Join(e.dir, "open.yaml")
	if err := os.WriteFile(e.policy, []byte("name: open\ntools:\n  - allow: true\nreads:\n  - allow: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := e.cluster(2)
	gone := connect(t, nodes[0], connOpts{})
	if res := gone.call("swarm_start", map[string]any{"app": "counter", "id": "orph"}); res.IsError {
		t.Fatal(textOf(res))
	}
	live := connect(t, nodes[0], connOpts{})
	if res := live.call("swarm_start", map[string]any{"app": "counter", "id": "live"}); res.IsError {
		t.Fatal(textOf(res))
	}
	// The connection ends on the other node: a DELETE there.
	again := connect(t, nodes[1], connOpts{sessionID: gone.id})
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	eventually(t, 30*time.Second, "node1 stops orph", func() bool {
		return !slices.Contains(nodes[0].LocalSessions(), "orph")
	})
	t.Logf("the orphaned session stopped %s after its connection's DELETE on another node", time.Since(ended).Round(100*time.Millisecond))
	if !slices.Contains(nodes[0].LocalSessions(), "live") {
		t.Error("the session of a connection still open was stopped too")
	}
}
