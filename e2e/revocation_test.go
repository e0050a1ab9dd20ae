package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// clusterNode is one node of a multi-process cluster.
type clusterNode struct {
	*runningNode
	name   string
	gossip string
}

// startClusterNode starts `bin serve --dev --name name` joining join (a
// gossip address, empty for the first node) and waits until it is healthy.
func startClusterNode(t *testing.T, bin, name, join string) *clusterNode {
	t.Helper()
	gossip := fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	// Later flags win: these replace startNodeArgs' name and gossip address.
	args := []string{"--dev", "--name", name, "--gossip", gossip}
	if join != "" {
		args = append(args, "--join", join)
	}
	n := startNodeArgs(t, bin, args...)
	return &clusterNode{runningNode: n, name: name, gossip: gossip}
}

// kill ends the node with SIGKILL: no leave, no flush.
func (n *clusterNode) kill(t *testing.T) {
	t.Helper()
	n.killedOnPurpose = true
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing %s: %v", n.name, err)
	}
	<-n.exited
}

// members returns what node n's /readyz says of each member's state.
func (n *clusterNode) members(t *testing.T) map[string]string {
	t.Helper()
	resp, err := http.Get(n.BaseURL + "/readyz")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Members []struct{ Name, State string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil
	}
	out := map[string]string{}
	for _, m := range body.Members {
		out[m.Name] = m.State
	}
	return out
}

func awaitCond(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", d, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// mcpPost posts one JSON-RPC message with session id sid (empty: none)
// and returns the status and the Mcp-Session-Id answered.
func mcpPost(t *testing.T, url, sid, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// A DELETE's revocation survives the death (kill -9) of the node that
// took it: the other nodes keep refusing the id.
func TestRevocationSurvivesKillOfTheRevoker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	bin := buildNode(t)
	n1 := startClusterNode(t, bin, "node1", "")
	n2 := startClusterNode(t, bin, "node2", n1.gossip)
	n3 := startClusterNode(t, bin, "node3", n1.gossip)
	nodes := []*clusterNode{n1, n2, n3}
	for _, n := range nodes {
		awaitCond(t, 30*time.Second, n.name+" lists three members alive", func() bool {
			m := n.members(t)
			return m["node1"] == "alive" && m["node2"] == "alive" && m["node3"] == "alive"
		})
	}
	status, sid := mcpPost(t, n1.MCPURL(), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	if status != http.StatusOK || sid == "" {
		t.Fatalf("initialize answered %d, session id %q", status, sid)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if st, _ := mcpPost(t, n3.MCPURL(), sid, ping); st != http.StatusOK {
		t.Fatalf("the live id answered %d on node3", st)
	}
	del, _ := http.NewRequest(http.MethodDelete, n2.MCPURL(), nil)
	del.Header.Set("Mcp-Session-Id", sid)
	del.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE on node2 answered %d", resp.StatusCode)
	}
	n2.kill(t)
	for _, n := range []*clusterNode{n1, n3} {
		awaitCond(t, 30*time.Second, n.name+" sees node2 dead", func() bool {
			s := n.members(t)["node2"]
			return s != "" && s != "alive" && s != "suspect"
		})
	}
	// The dead node's own records are hidden now; for a second, the id
	// must still be refused everywhere.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, n := range []*clusterNode{n1, n3} {
			if st, _ := mcpPost(t, n.MCPURL(), sid, ping); st != http.StatusNotFound {
				t.Fatalf("after node2 died, %s answered %d for the id it revoked", n.name, st)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
