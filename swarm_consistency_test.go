package mcpswarm_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
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
	e.kill("node2")
	for _, n := range []int{0, 2} {
		eventually(t, 20*time.Second, "the others see node2 dead", func() bool { return nodes[n].AliveMembers() == 2 })
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, n := range []int{0, 2} {
			if st := postStatus(t, nodes[n], c.id); st != http.StatusNotFound {
				t.Fatalf("after the revoker died, node%d answered %d for the revoked id", n+1, st)
			}
		}
		// Paces the samples of a refusal that must hold for the whole
		// window: there is nothing to await, only to keep checking.
		time.Sleep(50 * time.Millisecond)
	}
	// The revoker's partition goes (DeadGrace): each survivor holds the
	// revocation in its own partition by then, and keeps refusing.
	for _, n := range []int{0, 2} {
		eventually(t, 20*time.Second, "a survivor holds the revocation itself", func() bool { return nodes[n].Footprint().ConnsRevoked == 1 })
	}
	deadline = time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range []int{0, 2} {
			if st := postStatus(t, nodes[n], c.id); st != http.StatusNotFound {
				t.Fatalf("after the revoker's records went, node%d answered %d for the revoked id", n+1, st)
			}
		}
		// Paces the samples of a refusal that must hold for the whole
		// window: there is nothing to await, only to keep checking.
		time.Sleep(50 * time.Millisecond)
	}
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
