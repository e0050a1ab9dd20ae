package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
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
	b := newMember(t, bin, "nodeB")
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
		if _, err := n1.await(30*time.Second, n1.isHealthy); err != nil {
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
