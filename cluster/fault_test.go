package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// putN writes n keys into every registry of node n.
func putN(t *testing.T, n *tnode, prefix string, count int) {
	t.Helper()
	for _, reg := range testRegistries {
		for i := range count {
			if err := n.regs[reg].Put(fmt.Sprintf("%s%02d", prefix, i), []byte(n.name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// visibleOf counts the entries of origin o visible in a node's registries.
func visibleOf(n *tnode, o crdt.Origin) int {
	c := 0
	for _, reg := range testRegistries {
		n.regs[reg].Range(func(e crdt.Entry) bool {
			if e.Origin == o {
				c++
			}
			return true
		})
	}
	return c
}

// holds reports whether any registry of n still holds origin o (hidden or not).
func holds(n *tnode, o crdt.Origin) bool {
	for _, reg := range testRegistries {
		for _, v := range n.regs[reg].Digest() {
			if v.Origin == o {
				return true
			}
		}
	}
	return false
}

func TestKillHidesThenDeletes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the dead grace on wall time")
	}
	t.Run("crash", func(t *testing.T) { testKill(t, false) })
	// The gRPC server outlives the cluster: only memberlist's verdict hides.
	t.Run("memberlist-only", func(t *testing.T) { testKill(t, true) })
}

func testKill(t *testing.T, keepGRPC bool) {
	const grace = 1500 * time.Millisecond
	nodes := startCluster(t, 3, func(c *Config) { c.DeadGrace = grace })
	victim, survivors := nodes[2], nodes[:2]
	putN(t, victim, "v", 5)
	eventually(t, 5*time.Second, func() error { return converged(nodes, nil) })
	vo := victim.c.Origin()
	if got := visibleOf(survivors[0], vo); got != 10 {
		t.Fatalf("survivor sees %d of the victim's entries before the kill, want 10", got)
	}

	type times struct {
		mu           sync.Mutex
		dead, hidden time.Time
		removed      int
	}
	obs := make([]*times, len(survivors))
	for i, s := range survivors {
		tm := &times{}
		obs[i] = tm
		cancel := s.c.WatchMembers(func(m Member) {
			if m.Name == victim.name && m.State == StateDead {
				tm.mu.Lock()
				if tm.dead.IsZero() {
					tm.dead = time.Now()
				}
				tm.mu.Unlock()
			}
		})
		t.Cleanup(cancel)
		for _, reg := range testRegistries {
			s.regs[reg].OnChange(func(ch crdt.Change) {
				if ch.Origin == vo && ch.New == nil {
					tm.mu.Lock()
					if tm.removed++; tm.removed == 10 {
						tm.hidden = time.Now()
					}
					tm.mu.Unlock()
				}
			})
		}
	}

	killed := time.Now()
	if keepGRPC {
		victim.killed = true
		victim.c.Kill()
		t.Cleanup(victim.srv.Stop)
	} else {
		victim.kill()
	}
	eventually(t, 10*time.Second, func() error {
		for i, s := range survivors {
			obs[i].mu.Lock()
			h, d := obs[i].hidden, obs[i].dead
			obs[i].mu.Unlock()
			if h.IsZero() || visibleOf(s, vo) != 0 || !s.regs["sessions"].Hidden(vo) {
				return fmt.Errorf("%s still shows the victim's entries", s.name)
			}
			if d.IsZero() {
				return fmt.Errorf("%s has not declared the victim dead", s.name)
			}
		}
		return nil
	})
	for i, s := range survivors {
		tm := obs[i]
		tm.mu.Lock()
		if lag := tm.hidden.Sub(tm.dead); lag > time.Second {
			t.Errorf("%s hid the victim's entries %v after memberlist declared it dead, want <= 1s", s.name, lag)
		}
		t.Logf("%s: dead after %v, hidden after %v", s.name, tm.dead.Sub(killed), tm.hidden.Sub(killed))
		tm.mu.Unlock()
	}

	// Deleted after the grace period, not before.
	eventually(t, grace+5*time.Second, func() error {
		for _, s := range survivors {
			if holds(s, vo) {
				return fmt.Errorf("%s still holds %s", s.name, vo)
			}
			if _, ok := s.c.Member(victim.name); ok {
				return fmt.Errorf("%s still lists %s", s.name, victim.name)
			}
		}
		return nil
	})
	for i, s := range survivors {
		obs[i].mu.Lock()
		if kept := time.Since(obs[i].dead); kept < grace {
			t.Errorf("%s deleted the victim's entries %v after its death, before the %v grace", s.name, kept, grace)
		}
		obs[i].mu.Unlock()
	}
	if !strings.Contains(survivors[0].logs.String(), "deleting entries of dead origin") {
		t.Error("deletion not logged")
	}
}

func TestRestartRestoresUnderNewEpoch(t *testing.T) {
	nodes := startCluster(t, 2)
	dir := t.TempDir()
	victim := startNode(t, nodes[0].net, "n2", dir, joinTo(nodes[0]))
	all := append(nodes, victim)
	awaitMembers(t, all, 10*time.Second)
	putN(t, victim, "r", 4)
	if err := victim.regs["tools"].Remove("r03"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error { return converged(all, nil) })
	old := victim.c.Origin()
	victim.kill()
	eventually(t, 10*time.Second, func() error {
		for _, s := range nodes {
			if m, ok := s.c.Member("n2"); !ok || m.State != StateDead || !s.regs["tools"].Hidden(old) {
				return fmt.Errorf("%s: n2 not dead and hidden yet: %+v", s.name, m)
			}
		}
		return nil
	})

	again := startNode(t, nodes[0].net, "n2", dir, joinTo(nodes[0]))
	nw := again.c.Origin()
	if nw.Epoch <= old.Epoch {
		t.Fatalf("new epoch %d not after old %d", nw.Epoch, old.Epoch)
	}
	if got := visibleOf(again, nw); got != 7 {
		t.Fatalf("restarted node restored %d entries, want 7:\n%s%s", got, dump(again.regs["sessions"]), dump(again.regs["tools"]))
	}
	logs := again.logs.String()
	if i, j := strings.Index(logs, "restored=7"), strings.Index(logs, "joined cluster"); i < 0 || j < 0 || i > j {
		t.Errorf("want the restore logged before the join (restore at %d, join at %d)", i, j)
	}
	all = append(nodes, again)
	eventually(t, 10*time.Second, func() error {
		for _, s := range nodes {
			if got := visibleOf(s, nw); got != 7 {
				return fmt.Errorf("%s sees %d entries of %s", s.name, got, nw)
			}
			// The old epoch is gone as soon as the new one is seen, long
			// before the 30 s grace.
			if holds(s, old) {
				return fmt.Errorf("%s still holds %s", s.name, old)
			}
		}
		return nil
	})
	eventually(t, 5*time.Second, func() error { return converged(all, nil) })
}

func TestSuspectWhenGRPCDown(t *testing.T) {
	nodes := startCluster(t, 3)
	victim := nodes[2]
	putN(t, victim, "s", 2)
	eventually(t, 5*time.Second, func() error { return converged(nodes, nil) })
	vo := victim.c.Origin()
	addr := victim.cfg.GRPCAddr
	victim.srv.Stop() // memberlist stays up
	eventually(t, 10*time.Second, func() error {
		for _, s := range nodes[:2] {
			if m, _ := s.c.Member(victim.name); m.State != StateSuspect {
				return fmt.Errorf("%s sees %s as %s", s.name, victim.name, m.State)
			}
			if visibleOf(s, vo) != 0 {
				return fmt.Errorf("%s still shows the suspect's entries", s.name)
			}
		}
		return nil
	})
	for _, s := range nodes[:2] {
		if metric(t, s.prom, "mcpswarm_cluster_suspects_total") < 1 {
			t.Errorf("%s: suspect not counted", s.name)
		}
		if metric(t, s.prom, "mcpswarm_cluster_members", "state", "suspect") != 1 {
			t.Errorf("%s: members{suspect} != 1", s.name)
		}
		if !strings.Contains(s.logs.String(), "suspect") {
			t.Errorf("%s: suspect not logged", s.name)
		}
		if _, err := s.c.PeerConn(victim.name); err == nil {
			t.Errorf("%s: PeerConn to a suspect succeeded", s.name)
		}
	}

	// The gRPC port comes back: alive again, entries visible again.
	lis, err := victim.listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(victim.c.ServerOptions()...)
	victim.c.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	victim.srv = srv
	eventually(t, 10*time.Second, func() error {
		for _, s := range nodes[:2] {
			if m, _ := s.c.Member(victim.name); m.State != StateAlive {
				return fmt.Errorf("%s sees %s as %s", s.name, victim.name, m.State)
			}
			if visibleOf(s, vo) != 4 {
				return fmt.Errorf("%s shows %d of the recovered node's entries", s.name, visibleOf(s, vo))
			}
		}
		return nil
	})
}

func TestDrainingIsVisible(t *testing.T) {
	nodes := startCluster(t, 2)
	if err := nodes[1].c.SetDraining(true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if m, _ := nodes[0].c.Member("n1"); m.State != StateDraining {
			return fmt.Errorf("n1 is %s", m.State)
		}
		return nil
	})
	if _, err := nodes[0].c.PeerConn("n1"); err != nil {
		t.Errorf("PeerConn to a draining node: %v", err)
	}
	if err := nodes[1].c.SetDraining(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if m, _ := nodes[0].c.Member("n1"); m.State != StateAlive {
			return fmt.Errorf("n1 is %s", m.State)
		}
		return nil
	})
}

func TestGracefulStopLeaves(t *testing.T) {
	nodes := startCluster(t, 2)
	putN(t, nodes[1], "g", 1)
	eventually(t, 5*time.Second, func() error { return converged(nodes, nil) })
	o := nodes[1].c.Origin()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := nodes[1].c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	nodes[1].killed = true
	nodes[1].srv.Stop()
	eventually(t, 5*time.Second, func() error {
		if m, _ := nodes[0].c.Member("n1"); m.State != StateLeft || visibleOf(nodes[0], o) != 0 {
			return fmt.Errorf("n1 is %s with %d entries visible", m.State, visibleOf(nodes[0], o))
		}
		return nil
	})
	if err := nodes[1].regs["tools"].Put("x", nil); err == nil {
		t.Error("Put after Stop succeeded")
	}
}
