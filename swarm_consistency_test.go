package mcpswarm_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
)

// A DELETE's revocation outlives the node that took it: once that node is
// dead (its own records hidden), the id stays refused on the others.
func TestRevocationSurvivesTheRevokersDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a node on sockets and wall time")
	}
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	c := connect(t, nodes[0], connOpts{token: aliceToken})
	if st := postStatus(t, nodes[2], c.id); st != http.StatusOK {
		t.Fatalf("the live id answered %d on node3", st)
	}
	del, _ := http.NewRequest(http.MethodDelete, "http://"+nodes[1].HTTPAddr()+"/mcp", nil)
	del.Header.Set("Mcp-Session-Id", c.id)
	del.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	del.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := httpClient(nodes[1]).Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE on node2 answered %d", resp.StatusCode)
	}
	// Read-your-writes: refused everywhere as soon as the DELETE answered.
	for _, n := range nodes {
		if st := postStatus(t, n, c.id); st != http.StatusNotFound {
			t.Fatalf("right after the DELETE, %s answered %d", n.HTTPAddr(), st)
		}
	}
	revoker := mcpswarm.Incarnation(nodes[0], "node2")
	e.kill("node2")
	// The survivors refuse the id at every step the revoker's death takes
	// them through: while they still hold its records, once they hide
	// them, once each holds the revocation itself, and after the
	// revoker's partition is deleted (DeadGrace).
	refusing := func(step string, cond func(n *mcpswarm.Node) error) {
		t.Helper()
		for _, n := range []int{0, 2} {
			await(t, 20*time.Second, step, func() error {
				if st := postStatus(t, nodes[n], c.id); st != http.StatusNotFound {
					t.Fatalf("until %s, node%d answered %d for the revoked id", step, n+1, st)
				}
				return cond(nodes[n])
			})
		}
	}
	refusing("the others see node2 dead", func(n *mcpswarm.Node) error {
		if k := n.AliveMembers(); k != 2 {
			return fmt.Errorf("%d members alive", k)
		}
		return nil
	})
	refusing("a survivor holds the revocation itself", func(n *mcpswarm.Node) error {
		if k := n.Footprint().ConnsRevoked; k != 1 {
			return fmt.Errorf("%d revocations of its own", k)
		}
		return nil
	})
	refusing("the revoker's partition is deleted", func(n *mcpswarm.Node) error {
		if mcpswarm.HoldsEntriesOf(n, "conns", revoker) {
			return fmt.Errorf("still holds entries of %s", revoker)
		}
		return nil
	})
	refusing("the end", func(*mcpswarm.Node) error { return nil })
}

// One 2026-07-28 approval presented to two nodes at the same moment runs
// the gated tool once: the session's owner arbitrates.
func TestModernApprovalSentToTwoNodesAtOnceRunsOnce(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "login", "id": "askdup"}); res.IsError {
		t.Fatal(textOf(res))
	}
	for _, n := range nodes[1:] {
		eventually(t, 10*time.Second, "node "+n.HTTPAddr()+" offers askdup.submit.click", func() bool {
			return modernCall(t, n, "askdup.submit.click", "", nil)["resultType"] == "input_required"
		})
	}
	approve := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	for round := range 5 {
		first := modernCall(t, nodes[0], "askdup.submit.click", "", nil)
		state, _ := first["requestState"].(string)
		if first["resultType"] != "input_required" || state == "" {
			t.Fatalf("round %d: the Ask did not answer input_required: %v", round, first)
		}
		var wg sync.WaitGroup
		results := make([]map[string]any, 2)
		start := make(chan struct{})
		for i, n := range nodes[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = modernCall(t, n, "askdup.submit.click", state, approve)
			}()
		}
		close(start)
		wg.Wait()
		// A state refused as replayed did not run; the app's answer (a click
		// applied, or refused once signed in) means it got past the arbiter.
		ran, replayed := 0, 0
		for _, r := range results {
			sc, _ := r["structuredContent"].(map[string]any)
			text := fmt.Sprint(r["content"])
			switch {
			case sc["error"] == "request_state_replayed":
				replayed++
			case strings.Contains(text, "click applied") || strings.Contains(text, "no longer offers"):
				ran++
			default:
				t.Fatalf("round %d: unexpected answer %v", round, r)
			}
		}
		if ran != 1 || replayed != 1 {
			t.Fatalf("round %d: the approval ran %d times, refused as replayed %d times (results %v)", round, ran, replayed, results)
		}
	}
}

// BenchmarkInitializeAcknowledged measures initialize, whose connection
// record is applied by every live peer before it is answered, on a lone
// node (nothing to wait for: the baseline) and on node1 of three. The
// policy lifts the per-principal connection and initialize caps, which a
// benchmark's thousands of connections would otherwise meet.
func BenchmarkInitializeAcknowledged(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", k), func(b *testing.B) {
			e := newSwarmEnv(b)
			e.limit("limits:\n  connections_per_principal: 1000000\n  initializes_per_minute: 1000000\n")
			nodes := e.cluster(k)
			b.ResetTimer()
			for range b.N {
				connect(b, nodes[0], connOpts{token: aliceToken})
			}
		})
	}
}
