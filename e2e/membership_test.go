package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// rounds reads a round count from env var name, or returns def.
func rounds(t *testing.T, name string, def int) int {
	t.Helper()
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, s)
		}
		return n
	}
	return def
}

// Three nodes started at once, node2 and node3 joining node1 (as `make
// cluster` does), converge: every node lists all three alive within 2 s of
// the last one serving HTTP (HTTP serves after the node has joined).
// MCPSWARM_CONVERGE_ROUNDS sets the number of starts (default 50).
func TestThreeNodeStartsConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 150 processes")
	}
	bin := ensureBinary(t)
	n := rounds(t, "MCPSWARM_CONVERGE_ROUNDS", 50)
	var worst time.Duration
	var took []time.Duration
	for round := range n {
		d, err := convergeOnce(t, bin, round)
		if err != nil {
			t.Fatalf("round %d of %d: %v", round+1, n, err)
		}
		took = append(took, d)
		worst = max(worst, d)
	}
	slices.Sort(took)
	t.Logf("%d three-node starts converged; median %v, worst %v", n, took[len(took)/2].Round(time.Millisecond), worst.Round(time.Millisecond))
}

// convergeOnce starts three fresh nodes at once and returns how long after
// the last served HTTP every node listed all three alive.
func convergeOnce(t *testing.T, bin string, round int) (time.Duration, error) {
	names := []string{"node1", "node2", "node3"}
	ms := make([]*member, 3)
	for i, name := range names {
		ms[i] = newMember(t, bin, name)
	}
	defer func() {
		for _, m := range ms {
			m.kill()
		}
	}()
	for i, m := range ms {
		if i == 0 {
			m.start()
		} else {
			m.start(ms[0].Gossip)
		}
	}
	for _, m := range ms {
		if _, err := m.await(30*time.Second, m.isHealthy); err != nil {
			return 0, fmt.Errorf("waiting for HTTP: %w", err)
		}
	}
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.await(2*time.Second, m.seesAlive(names...))
		}()
	}
	wg.Wait()
	took := time.Since(began)
	for i, err := range errs {
		if err != nil {
			return took, fmt.Errorf("round %d, %s did not converge: %w\nlog of %s:\n%s", round+1, names[i], err, names[i], tail(ms[i].Log.String(), 60))
		}
	}
	return took, nil
}

// isHealthy is a condition: /healthz answers.
func (m *member) isHealthy(ctx context.Context) error {
	_, err := m.readyz(ctx)
	return err
}

// A node whose own seed join failed at start (its seed was not up) and
// which a peer then joined is a full member: /readyz answers 200 soon after,
// not 503 for as long as its seed stays away.
func TestNodeJoinedByPeerBecomesReady(t *testing.T) {
	bin := ensureBinary(t)
	absent := fmt.Sprintf("127.0.0.1:%d", stablePort(t)) // nobody listens here
	a := newMember(t, bin, "nodeA")
	a.start(absent)
	b := newMember(t, bin, "nodeB")
	// Every line, debug included, of a failed join, a join and a leave.
	t.Cleanup(func() { a.checkLogKeys(t); b.checkLogKeys(t) })
	if _, err := a.await(30*time.Second, a.isHealthy); err != nil {
		t.Fatal(err)
	}
	r, err := a.readyz(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.Status == 200 {
		t.Fatalf("a node whose only seed is absent answered /readyz 200 before anyone joined it")
	}
	b.start(a.Gossip)
	if _, err := b.await(30*time.Second, b.seesAlive("nodeA", "nodeB")); err != nil {
		t.Fatal(err)
	}
	took, err := a.await(5*time.Second, a.isReady)
	if err != nil {
		t.Fatalf("nodeA, joined by nodeB, is not ready: %v", err)
	}
	t.Logf("nodeA ready %v after nodeB listed it", took.Round(time.Millisecond))
	b.stop()
	a.stop()
}

// A node restarted at once without seeds (node1 of `make cluster`), after a
// clean stop or a crash, rejoins the members it last knew, from its data
// dir: a session started on it right after the restart is listed by the
// other nodes within 1 s. MCPSWARM_RESTART_ROUNDS sets the restarts
// (default 4).
func TestSeedlessRestartRejoinsAtOnce(t *testing.T) {
	bin := ensureBinary(t)
	names := []string{"node1", "node2", "node3"}
	ms := make([]*member, 3)
	for i, name := range names {
		ms[i] = newMember(t, bin, name)
		if i == 0 {
			ms[i].start()
		} else {
			ms[i].start(ms[0].Gossip)
		}
	}
	for _, m := range ms {
		if _, err := m.await(30*time.Second, m.seesAlive(names...)); err != nil {
			t.Fatal(err)
		}
	}
	n1 := ms[0]
	for round := range rounds(t, "MCPSWARM_RESTART_ROUNDS", 4) {
		// Odd rounds crash node1: its peers still hold it alive, and the
		// new process answers their probes under the same name, so only a
		// push/pull tells them about the new incarnation.
		if round%2 == 1 {
			n1.kill()
		} else {
			n1.stop()
		}
		n1.start() // no seeds: as node1 of `make cluster`
		if _, err := n1.await(30*time.Second, n1.isReady); err != nil {
			t.Fatal(err)
		}
		c := n1.mcpClient(t)
		id := fmt.Sprintf("r%d", round)
		if _, err := callTool(t.Context(), c, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, m := range ms[1:] {
			took, err := m.await(time.Second, listsSession(m.admin(t, nil), id))
			if err != nil {
				t.Fatalf("round %d: the restarted node's new session is not listed elsewhere: %v", round, err)
			}
			t.Logf("round %d: %s listed %s %v after swarm_start answered", round, m.Name, id, took.Round(time.Millisecond))
		}
		_ = c.Close()
	}
	for _, m := range ms {
		m.stop()
	}
}

// Requests that arrive while a restarted node restores its sessions never
// end the node: until its sessions are restored and published it answers
// MCP with 503 and Retry-After, and then serves them (here: swarm_stop of
// each restored session, from the connection that started it).
func TestRequestsDuringRestoreGet503(t *testing.T) {
	bin := ensureBinary(t)
	n := newMember(t, bin, "solo")
	for round := range rounds(t, "MCPSWARM_RESTORE_ROUNDS", 3) {
		n.start()
		if _, err := n.await(30*time.Second, n.isReady); err != nil {
			t.Fatal(err)
		}
		tr, err := transport.NewStreamableHTTP(n.BaseURL() + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		req := mcp.InitializeRequest{}
		req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
		req.Params.ClientInfo = mcp.Implementation{Name: "e2e-restore", Version: "1"}
		if _, err := c.Initialize(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		const sessions = 16 // the dev policy's cap per principal
		for i := range sessions {
			if _, err := callTool(t.Context(), c, "swarm_start", map[string]any{"app": "counter", "id": fmt.Sprintf("r%ds%d", round, i)}); err != nil {
				t.Fatal(err)
			}
		}
		sid := tr.GetSessionId()
		n.stop()
		_ = c.Close() // after the stop: its DELETE must not end the session

		// Every restored session gets its own client hammering swarm_stop
		// from before the node listens until one succeeds.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[int]int{}
		var failures []string
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("r%ds%d", round, i)
				for ctx.Err() == nil {
					code, retryAfter, body, err := postToolCall(ctx, n.BaseURL()+"/mcp", sid, "swarm_stop", map[string]any{"id": id})
					mu.Lock()
					if err == nil {
						counts[code]++
						if code == http.StatusServiceUnavailable && retryAfter == "" {
							failures = append(failures, "a 503 without Retry-After")
						}
					}
					mu.Unlock()
					if err == nil && code == http.StatusOK {
						if !strings.Contains(body, `"result"`) || strings.Contains(body, `"isError":true`) {
							mu.Lock()
							failures = append(failures, fmt.Sprintf("swarm_stop %s: %s", id, body))
							mu.Unlock()
						}
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				mu.Lock()
				failures = append(failures, "swarm_stop "+id+" never answered 200")
				mu.Unlock()
			}()
		}
		n.start()
		wg.Wait()
		cancel()
		if !n.running() {
			t.Fatalf("round %d: the node exited while serving requests during its restore", round)
		}
		for _, f := range failures {
			t.Errorf("round %d: %s", round, f)
		}
		t.Logf("round %d: answers by status during restart: %v", round, counts)
		n.stop()
		if t.Failed() {
			return
		}
	}
}

// postToolCall sends one tools/call on an existing Streamable HTTP session
// and returns the status, the Retry-After header and the body.
func postToolCall(ctx context.Context, url, sid, name string, args map[string]any) (int, string, string, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	if err != nil {
		return 0, "", "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err
}
