package swarm

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/mcpswarm/mcpswarm/cluster"
)

// Every node names the same holders for a nonce, whatever order it lists
// the members in: spentCopies distinct members, or all of them when
// fewer.
func TestSpentHoldersAreTheSameOnEveryNode(t *testing.T) {
	members := []string{"n1", "n2", "n3", "n4", "n5"}
	for i := range 50 {
		nonce := fmt.Sprintf("nonce-%d", i)
		want := spentHolders(nonce, members, spentCopies)
		if len(want) != spentCopies || want[0] == want[1] {
			t.Fatalf("%s: holders %v, want %d distinct members", nonce, want, spentCopies)
		}
		shuffled := slices.Clone(members)
		slices.Reverse(shuffled)
		shuffled = append(shuffled, "n3") // a member listed twice counts once
		if got := spentHolders(nonce, shuffled, spentCopies); !slices.Equal(got, want) {
			t.Fatalf("%s: holders %v from another order, want %v", nonce, got, want)
		}
	}
	if got := spentHolders("nonce", []string{"n1"}, spentCopies); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("a lone node's holders: %v, want itself", got)
	}
}

// A spent state survives any one membership change without a copy: when
// a member dies, restarts or joins, at least one of the nonce's holders
// before is among its holders after, so a Spend (which asks both) still
// finds it. When the first holder dies, the second becomes first.
func TestSpentHoldersKeepOneHolderAcrossAnyOneChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 70).Draw(t, "members")
		var members []string
		for i := range n {
			members = append(members, fmt.Sprintf("node-%d", i))
		}
		nonce := rapid.StringN(1, 24, -1).Draw(t, "nonce")
		before := spentHolders(nonce, members, spentCopies)

		// A member dies (or leaves).
		gone := rapid.IntRange(0, n-1).Draw(t, "gone")
		after := spentHolders(nonce, slices.Delete(slices.Clone(members), gone, gone+1), spentCopies)
		if n > 1 && !slices.ContainsFunc(after, func(h string) bool { return slices.Contains(before, h) }) {
			t.Fatalf("%s left: holders %v before, %v after share none", members[gone], before, after)
		}
		if members[gone] == before[0] && len(before) > 1 && after[0] != before[1] {
			t.Fatalf("the first holder %s died: first holder %s, want the second, %s", before[0], after[0], before[1])
		}

		// A member joins.
		joined := spentHolders(nonce, append(slices.Clone(members), "joiner"), spentCopies)
		if !slices.ContainsFunc(joined, func(h string) bool { return slices.Contains(before, h) }) {
			t.Fatalf("a node joined: holders %v before, %v after share none", before, joined)
		}
	})
}

// Each node is the first holder of about 1/N of the nonces: the work of
// approvals spreads over the cluster instead of falling on every node.
func TestSpentHoldersSpreadOverTheMembers(t *testing.T) {
	const n, nonces = 16, 16000
	var members []string
	for i := range n {
		members = append(members, fmt.Sprintf("node%d", i+1))
	}
	held := map[string]int{}
	for i := range nonces {
		for _, h := range spentHolders(fmt.Sprintf("%024x", i*7919), members, spentCopies) {
			held[h]++
		}
	}
	want := nonces * spentCopies / n
	for _, m := range members {
		if got := held[m]; got < want*3/4 || got > want*5/4 {
			t.Errorf("%s holds %d of %d nonces' states, want about %d", m, got, nonces, want)
		}
	}
}

// After a membership change a node sends each state it holds only to the
// holders the state gained: none when nothing changed for it, the next in
// the rendezvous order when a holder died, a holder that restarted (it may
// have come back empty), and every other holder when this node itself has
// just started.
func TestSpentMovesGoOnlyToTheHoldersAStateGained(t *testing.T) {
	live := map[string]uint64{"n1": 1, "n2": 1, "n3": 1, "n4": 1, "n5": 1}
	names := slices.Sorted(maps.Keys(live))
	held := map[string]int64{}
	for i := range 40 {
		held[fmt.Sprintf("nonce-%d", i)] = 100
	}
	without := func(m map[string]uint64, name string) map[string]uint64 {
		out := maps.Clone(m)
		delete(out, name)
		return out
	}
	count := func(moves map[string]map[string]int64) int {
		k := 0
		for _, m := range moves {
			k += len(m)
		}
		return k
	}

	if moves := spentMoves(held, "n1", live, maps.Clone(live)); len(moves) != 0 {
		t.Fatalf("nothing changed, yet copies go out: %v", moves)
	}

	// Just started: every state to its holders other than n1.
	moves := spentMoves(held, "n1", nil, live)
	for nonce := range held {
		for _, h := range spentHolders(nonce, names, spentCopies) {
			if _, ok := moves[h][nonce]; ok == (h == "n1") {
				t.Fatalf("just started: %s to %s is %v", nonce, h, ok)
			}
		}
	}

	// n3 dies: a state goes to exactly the holder it gained, for the
	// states n3 held; no copy goes to n3 or to n1 itself.
	after := without(live, "n3")
	moves = spentMoves(held, "n1", live, after)
	want := 0
	for nonce := range held {
		old := spentHolders(nonce, names, spentCopies)
		now := spentHolders(nonce, slices.Sorted(maps.Keys(after)), spentCopies)
		for _, h := range now {
			if !slices.Contains(old, h) && h != "n1" {
				want++
				if _, ok := moves[h][nonce]; !ok {
					t.Fatalf("n3 died: %s gained holder %s (holders %v → %v) but gets no copy", nonce, h, old, now)
				}
			}
		}
	}
	if got := count(moves); got != want || moves["n3"] != nil || moves["n1"] != nil {
		t.Fatalf("n3 died: %d copies %v, want %d, none to n3 or n1", got, moves, want)
	}

	// n2 restarts (a new epoch): it gets every state it holds again.
	restarted := maps.Clone(live)
	restarted["n2"] = 2
	moves = spentMoves(held, "n1", live, restarted)
	for nonce := range held {
		if slices.Contains(spentHolders(nonce, names, spentCopies), "n2") != (moves["n2"][nonce] != 0) {
			t.Fatalf("n2 restarted: copy of %s to it is %v", nonce, moves["n2"][nonce] != 0)
		}
	}
	if len(moves) != 1 {
		t.Fatalf("n2 restarted: copies to %v, want to n2 only", slices.Collect(maps.Keys(moves)))
	}
}

// A state is held once: of concurrent holds of one nonce by different
// Spend calls exactly one hears it was not held, while the same call asked
// again (or its copy sent by the other holder) hears it was not; a store
// reloads what it held (a restarted node), less what expired, and forgets
// expired states from disk too.
func TestSpentStoreHoldsOnceAndAcrossARestart(t *testing.T) {
	disk := cluster.NewMemoryStorage()
	now := time.Unix(1_000_000, 0)
	h, err := newSpentStore(disk, now)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for i := range 8 {
		wg.Go(func() {
			already, err := h.hold("n-1", fmt.Sprintf("call-%d", i), now.Add(time.Hour), now)
			if err != nil {
				t.Error(err)
			}
			if !already {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if fresh != 1 {
		t.Fatalf("eight holds of one nonce at once: %d heard it fresh, want 1", fresh)
	}
	winner := h.snapshot(now)["n-1"].by
	if already, _ := h.hold("n-1", winner, now.Add(time.Hour), now); already {
		t.Fatalf("the call that spent n-1 (%s), asked again, heard it was spent", winner)
	}
	if already, _ := h.hold("n-1", "", now.Add(time.Hour), now); !already {
		t.Fatal("a hold naming no call was not refused a spent nonce")
	}
	if _, err := h.hold("short", "call-s", now.Add(time.Second), now); err != nil {
		t.Fatal(err)
	}

	later := now.Add(time.Minute)
	again, err := newSpentStore(disk, later)
	if err != nil {
		t.Fatal(err)
	}
	if again.snapshot(later)["n-1"].by != winner || again.has("short") {
		t.Fatalf("restarted: holds n-1 %v (want true), the expired one %v (want false)", again.has("n-1"), again.has("short"))
	}
	// The next hold after a sweep interval forgets the expired state on
	// disk as well.
	if already, _ := h.hold("n-2", "call-2", later.Add(time.Hour), later.Add(spentSweepEvery)); already {
		t.Fatal("a fresh nonce counted as held")
	}
	onDisk := 0
	if err := disk.Load(spentBucket, func(string, []byte) error { onDisk++; return nil }); err != nil {
		t.Fatal(err)
	}
	if onDisk != 2 || h.len() != 2 {
		t.Fatalf("after the sweep: %d on disk, %d in memory, want 2 (n-1, n-2)", onDisk, h.len())
	}
}
