package mcpswarm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue #13: with limits.sessions_per_principal: 2, a principal got 6
// sessions on 3 nodes, since each node counted only its own. The cap now
// counts the sessions the replicated registry shows, cluster-wide.
func TestSessionsPerPrincipalHoldsAcrossNodes(t *testing.T) {
	e := newSwarmEnv(t)
	base, err := os.ReadFile(e.policy)
	if err != nil {
		t.Fatal(err)
	}
	e.policy = filepath.Join(e.dir, "limited.yaml")
	if err := os.WriteFile(e.policy, append(base, "limits:\n  sessions_per_principal: 2\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := e.cluster(3)
	var alice []*conn
	for _, n := range nodes {
		alice = append(alice, connect(t, n, connOpts{token: aliceToken}))
	}
	for i := range 2 {
		id := fmt.Sprintf("s%d", i)
		if res := alice[i].call("swarm_start", map[string]any{"app": "counter", "id": id}); res.IsError {
			t.Fatalf("start %s on node%d: %s", id, i+1, textOf(res))
		}
	}
	// Once node3 has replicated both, a third start there is refused.
	eventually(t, 10*time.Second, "node3 lists s0 and s1", func() bool {
		l := alice[2].listed()
		return l["s0"] != "" && l["s1"] != ""
	})
	res := alice[2].call("swarm_start", map[string]any{"app": "counter", "id": "s2"})
	if !res.IsError || !strings.Contains(textOf(res), "limits.sessions_per_principal: 2") {
		t.Fatalf("third session on a third node answered %q; want a refusal naming limits.sessions_per_principal", textOf(res))
	}
	// The cap is per principal: bob still starts one.
	bob := connect(t, nodes[2], connOpts{token: bobToken})
	if res := bob.call("swarm_start", map[string]any{"app": "counter", "id": "b0"}); res.IsError {
		t.Errorf("bob's first session: %s", textOf(res))
	}
	// Stopping one frees a slot anywhere.
	if res := alice[0].call("swarm_stop", map[string]any{"id": "s0"}); res.IsError {
		t.Fatal(textOf(res))
	}
	eventually(t, 10*time.Second, "node3 can start again", func() bool {
		return !alice[2].call("swarm_start", map[string]any{"app": "counter", "id": "s2"}).IsError
	})
}
