package mcpswarm_test

import (
	"strings"
	"testing"
	"time"
)

// Issue #13: swarm_start with someone else's id said "already exists in
// the swarm" (and, with its owner away, named the owner node), where every
// other surface says "not running (or is not yours)". Now another
// principal's id reads as unavailable, naming neither a session nor a node,
// and every other tool answers exactly as for an id never used.
func TestSwarmStartDoesNotRevealOthersSessions(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "counter", "id": "sq"}); res.IsError {
		t.Fatal(textOf(res))
	}
	alice2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 knows sq", func() bool { return alice2.tools()["sq.inc.click"] })
	bob := connect(t, nodes[1], connOpts{token: bobToken})
	res := bob.call("swarm_start", map[string]any{"app": "counter", "id": "sq"})
	got := textOf(res)
	for _, leak := range []string{"exists", "node1", "node2", "alice"} {
		if strings.Contains(got, leak) {
			t.Errorf("swarm_start with alice's id tells bob %q (mentions %q)", got, leak)
		}
	}
	if !strings.Contains(got, "not available") {
		t.Errorf("swarm_start with a taken id answered %q; want it to say the id is not available", got)
	}
	for _, tool := range []string{"swarm_stop", "swarm_get_model", "swarm_screenshot"} {
		taken := textOf(bob.call(tool, map[string]any{"id": "sq"}))
		never := textOf(bob.call(tool, map[string]any{"id": "zz"}))
		if strings.ReplaceAll(taken, `"sq"`, `"zz"`) != never {
			t.Errorf("%s: alice's id answers %q, a never-used id %q; want one answer", tool, taken, never)
		}
	}
	if res := alice.call("swarm_start", map[string]any{"app": "counter", "id": "sq"}); !strings.Contains(textOf(res), "already yours") {
		t.Errorf("alice restarting her own id: %q", textOf(res))
	}
}
