package mcpswarm_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
)

// Issue #13: with limits.sessions_per_principal: 2, a principal got 6
// sessions on 3 nodes, since each node counted only its own. The cap now
// counts the sessions the replicated registry shows, cluster-wide.
func TestSessionsPerPrincipalHoldsAcrossNodes(t *testing.T) {
	e := newSwarmEnv(t)
	e.limit("limits:\n  sessions_per_principal: 2\n")
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

// limits.sessions_per_principal: 0 is unlimited, as docs/SECURITY.md
// says: the session manager used to turn it into 16 per node, so the 17th
// start on one node was refused.
func TestZeroSessionsPerPrincipalIsUnlimited(t *testing.T) {
	e := newSwarmEnv(t)
	e.limit("limits:\n  sessions_per_principal: 0\n")
	nodes := e.cluster(2)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	for i := range 17 {
		id := fmt.Sprintf("s%d", i)
		if res := alice.call("swarm_start", map[string]any{"app": "counter", "id": id}); res.IsError {
			t.Fatalf("start %s (session %d of one principal, no cap): %s", id, i+1, textOf(res))
		}
	}
	other := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 10*time.Second, "node2 lists all 17", func() bool { return len(other.listed()) >= 17 })
	if res := other.call("swarm_start", map[string]any{"app": "counter", "id": "t0"}); res.IsError {
		t.Fatalf("an 18th session on the second node: %s", textOf(res))
	}
}

// rawInitialize posts an initialize with token to node n and returns the
// HTTP status, the body and the session id minted (if any).
func rawInitialize(t testing.TB, n *mcpswarm.Node, token string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := httpClient(n).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header.Get("Mcp-Session-Id")
}

// rawList sends tools/list on connection id through node n and returns the
// HTTP status.
func rawList(t testing.TB, n *mcpswarm.Node, token, id string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	req, err := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	res, err := httpClient(n).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode
}

// Issue #13: connections per principal had no bound; a principal could
// make every node store its initialize facts without end. The bound counts
// the principal's connections in the replicated registry, so connections
// opened through three nodes fill one cap, and a new one revokes the least
// recently active (clients rarely DELETE, so refusing would lock them out).
func TestConnectionsPerPrincipalHoldAcrossNodes(t *testing.T) {
	e := newSwarmEnv(t)
	e.limit("limits:\n  connections_per_principal: 3\n")
	nodes := e.cluster(3)
	open := func(n int) string {
		t.Helper()
		status, body, id := rawInitialize(t, nodes[n], aliceToken)
		if status != http.StatusOK || id == "" {
			t.Fatalf("alice's connection through node%d: %d %s", n+1, status, body)
		}
		return id
	}
	live := func(id string, n int) bool { return rawList(t, nodes[n], aliceToken, id) == http.StatusOK }
	ids := []string{open(0), open(1), open(2)}
	// Every initialize and revocation was applied by every peer before it
	// was answered, so the fourth connection, through node2, revokes the
	// least recently active one (opened first, on node1) everywhere.
	ids = append(ids, open(1))
	for n := range nodes {
		if live(ids[0], n) {
			t.Fatalf("alice's first connection still answers through node%d after a fourth under a limit of 3", n+1)
		}
	}
	for _, id := range ids[1:] {
		if !live(id, 2) {
			t.Fatalf("connection %s was revoked; only the least recently active one should be", id)
		}
	}
	// A request served through node1 makes the second connection the most
	// recently active there: node1's next initialize revokes the third.
	if !live(ids[1], 0) {
		t.Fatal("the second connection stopped answering")
	}
	ids = append(ids, open(0))
	if live(ids[2], 1) || !live(ids[1], 1) || !live(ids[3], 1) || !live(ids[4], 1) {
		t.Fatalf("after a fifth connection: live %v %v %v %v; want only the third revoked",
			live(ids[1], 1), live(ids[2], 1), live(ids[3], 1), live(ids[4], 1))
	}
	// The cap is per principal: bob's connection revokes none of alice's.
	if status, body, _ := rawInitialize(t, nodes[1], bobToken); status != http.StatusOK {
		t.Fatalf("bob's first connection: %d %s", status, body)
	}
	if !live(ids[1], 2) || !live(ids[3], 2) || !live(ids[4], 2) {
		t.Fatal("bob's connection revoked one of alice's")
	}
}
