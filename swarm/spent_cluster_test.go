package swarm

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
)

// kill crashes n: no leave, its gRPC server gone.
func (n testNode) kill() {
	n.sw.StopPublishing()
	n.cl.Kill()
	n.srv.Stop()
}

// TestSpentStateStaysSpentWhenItsHoldersDieAndRejoin is the guarantee of
// a single-use request state with its spent record kept by two holders
// only: once spent, it is refused on every node after its first holder
// dies, after its second dies too (a survivor took a copy), and after the
// first comes back from its disk, while fresh states are still accepted
// once.
func TestSpentStateStaysSpentWhenItsHoldersDieAndRejoin(t *testing.T) {
	disks := map[string]*cluster.MemoryStorage{}
	nodes := map[string]testNode{}
	var seed string
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("n%d", i)
		disks[name] = cluster.NewMemoryStorage()
		var join []string
		if seed != "" {
			join = []string{seed}
		}
		nodes[name] = startTestNodeWith(t, name, nodeOptions{spent: disks[name]}, join...)
		seed = nodes["n1"].cl.Self().GossipAddr
	}
	awaitAlive := func(want ...string) {
		t.Helper()
		want = slices.Sorted(slices.Values(want))
		await(t, fmt.Sprintf("every node sees exactly %v alive", want), func() bool {
			for _, name := range want {
				if got := slices.Sorted(func(yield func(string) bool) {
					for k := range nodes[name].sw.nonces.live() {
						if !yield(k) {
							return
						}
					}
				}); !slices.Equal(got, want) {
					return false
				}
			}
			return true
		})
	}
	awaitAlive("n1", "n2", "n3", "n4")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp := time.Now().Add(time.Hour)
	// spentOnEvery checks nonce is refused by every live node, and that a
	// fresh nonce is accepted once: a node that could not reach a holder
	// would refuse both, so the first check alone could pass by failing
	// closed.
	round := 0
	spentOnEvery := func(nonce string, live ...string) {
		t.Helper()
		for _, name := range live {
			if !nodes[name].sw.nonces.Spend(ctx, "tool", nonce, exp) {
				t.Fatalf("%s accepted %s again", name, nonce)
			}
		}
		round++
		fresh := fmt.Sprintf("fresh-%d", round)
		if nodes[live[0]].sw.nonces.Spend(ctx, "tool", fresh, exp) {
			t.Fatalf("%s refused a fresh state: it cannot reach the holders", live[0])
		}
		if !nodes[live[len(live)-1]].sw.nonces.Spend(ctx, "tool", fresh, exp) {
			t.Fatalf("%s accepted a state %s had just spent", live[len(live)-1], live[0])
		}
	}

	const nonce = "spent-once"
	order := spentHolders(nonce, []string{"n1", "n2", "n3", "n4"}, 4) // the rendezvous order
	if nodes["n1"].sw.nonces.Spend(ctx, "tool", nonce, exp) {
		t.Fatal("a fresh state counted as spent")
	}
	for i, name := range order {
		if held := nodes[name].sw.nonces.held.has(nonce); held != (i < spentCopies) {
			t.Fatalf("%s holds the spent state: %v; want only its first %d holders, %v", name, held, spentCopies, order[:spentCopies])
		}
	}

	// The first holder dies: the second still holds the state, and
	// copies it to the next in the order.
	nodes[order[0]].kill()
	awaitAlive(order[1:]...)
	spentOnEvery(nonce, order[1:]...)
	await(t, order[2]+" holds a copy", func() bool { return nodes[order[2]].sw.nonces.held.has(nonce) })

	// The second dies too: the copy keeps the state spent.
	nodes[order[1]].kill()
	awaitAlive(order[2:]...)
	spentOnEvery(nonce, order[2:]...)

	// The first comes back from its disk, first in the order again.
	nodes[order[0]] = startTestNodeWith(t, order[0], nodeOptions{spent: disks[order[0]]}, nodes[order[2]].cl.Self().GossipAddr)
	awaitAlive(order[0], order[2], order[3])
	spentOnEvery(nonce, order[0], order[2], order[3])
}

// TestSpentStateRefusedByANodeCutOffFromItsHolders: a node cut off from
// the majority, once it counts the holders of a spent state dead, would
// name others that never held it; it refuses every state instead.
func TestSpentStateRefusedByANodeCutOffFromItsHolders(t *testing.T) {
	t.Run("while it lists them", func(t *testing.T) { testSpentStateRefusedWhenCutOff(t, false) })
	// Its grace forgets the members it cannot hear; they still count
	// against its majority (cluster.Lost), so it still refuses.
	t.Run("after its grace forgot them", func(t *testing.T) { testSpentStateRefusedWhenCutOff(t, true) })
}

func testSpentStateRefusedWhenCutOff(t *testing.T, forgotten bool) {
	net, clock, nodes := startContractWith(t, 3, func(i int, cfg *cluster.Config) {
		if i == 2 && forgotten {
			cfg.DeadGrace = 2 * time.Second
		}
	})
	a, cut := nodes[0], nodes[2]
	// A nonce held by n1 and n2, the side that keeps the majority.
	var nonce string
	for i := 0; nonce == ""; i++ {
		if c := fmt.Sprintf("nonce-%d", i); !slices.Contains(spentHolders(c, []string{"n1", "n2", "n3"}, spentCopies), "n3") {
			nonce = c
		}
	}
	exp := time.Now().Add(time.Hour)
	if a.sw.Nonces().Spend(t.Context(), "tool", nonce, exp) {
		t.Fatal("a fresh state counted as spent")
	}
	net.Cut(cut.name, true)
	awaitContract(t, clock, 30*time.Second, "n3 counts n1 and n2 dead", func() error {
		if live := cut.sw.nonces.live(); len(live) != 1 {
			return fmt.Errorf("n3 counts %d live", len(live))
		}
		return nil
	})
	if forgotten {
		awaitContract(t, clock, 30*time.Second, "n3 forgets n1 and n2", func() error {
			for _, name := range []string{"n1", "n2"} {
				if _, ok := cut.cl.Member(name); ok {
					return fmt.Errorf("n3 still lists %s", name)
				}
			}
			return nil
		})
	}
	if !cut.sw.Nonces().Spend(t.Context(), "tool", nonce, exp) {
		t.Fatal("n3, cut off, accepted a state spent on the other side")
	}
}
