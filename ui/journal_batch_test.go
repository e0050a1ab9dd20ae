package ui

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/poll"
)

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.True(t, 10*time.Second, what, cond)
}

// ownWrites counts the registry writes (CRDT deltas: puts and removes) the
// journal's node has made: its origin's sequence.
func ownWrites(j *Journal) uint64 {
	for _, v := range j.reg.Digest() {
		if v.Origin.Name == j.node {
			return v.Seq
		}
	}
	return 0
}

// slotsOf returns this node's journal entries of session, by key.
func slotsOf(j *Journal, session string) map[string][]byte {
	out := map[string][]byte{}
	j.reg.Range(func(e crdt.Entry) bool {
		if e.Origin.Name == j.node && strings.HasPrefix(e.Key, session+"/") {
			out[e.Key] = e.Value
		}
		return true
	})
	return out
}

// click is the i-th action of a test on session, i from 1: its tool names
// it and its time orders it.
func click(session string, i int) Action {
	return Action{Session: session, Tool: "t" + strconv.Itoa(i), Source: SourceAgent, Principal: "alice",
		At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)}
}

// checkNewest fails unless got is exactly actions from..to of session
// (click numbers), oldest first.
func checkNewest(t *testing.T, got []Action, session string, from, to int) {
	t.Helper()
	var tools []string
	for _, a := range got {
		tools = append(tools, a.Tool)
	}
	var want []string
	for i := from; i <= to; i++ {
		want = append(want, "t"+strconv.Itoa(i))
	}
	if strings.Join(tools, " ") != strings.Join(want, " ") {
		t.Fatalf("%s shows %d actions %v, want t%d..t%d", session, len(got), tools, from, to)
	}
	for k, a := range got {
		if a.Session != session || a.Node != "n1" || k > 0 && a.Seq <= got[k-1].Seq {
			t.Fatalf("action %d of %s is %+v (previous seq %d)", k, session, a, got[max(k-1, 0)].Seq)
		}
	}
}

// TestJournalBurstShowsTheNewestSlotsInOrder records a burst of 100
// actions on one session with the default gather window: the page shows
// exactly the newest JournalSlots, oldest first, and limit keeps the
// newest of them.
func TestJournalBurstShowsTheNewestSlotsInOrder(t *testing.T) {
	j := startJournal(t, true)
	const n = 100
	for i := 1; i <= n; i++ {
		j.Record(click("s1", i))
	}
	eventually(t, "the burst's last action is shown", func() bool {
		got := j.Actions("s1", 0)
		return len(got) > 0 && got[len(got)-1].Tool == "t"+strconv.Itoa(n)
	})
	checkNewest(t, j.Actions("s1", 0), "s1", n-JournalSlots+1, n)
	checkNewest(t, j.Actions("s1", 10), "s1", n-9, n)
	if got := j.Actions("s1", 0); got[len(got)-1].Seq != n {
		t.Fatalf("the last action has seq %d, want %d", got[len(got)-1].Seq, n)
	}
}

// TestJournalWritesABurstInFewRegistryWrites pins the point of gathering:
// a burst of 100 actions costs a few registry writes (CRDT deltas, each
// shipped to every peer), not 100.
func TestJournalWritesABurstInFewRegistryWrites(t *testing.T) {
	j := startJournal(t, true)
	before := ownWrites(j)
	const n = 100
	for i := 1; i <= n; i++ {
		j.Record(click("s1", i))
	}
	j.Stop() // writes what is queued, so every write is counted
	checkNewest(t, j.Actions("s1", 0), "s1", n-JournalSlots+1, n)
	writes := ownWrites(j) - before
	t.Logf("%d actions took %d registry writes", n, writes)
	// One gather window holds the whole burst unless the recording
	// goroutine is held off the CPU for several windows.
	if writes > 10 {
		t.Fatalf("%d actions took %d registry writes, want a few", n, writes)
	}
}

// TestJournalBatchesEachSessionIntoItsOwnEntry gathers interleaved actions
// of three sessions into one batch (the window outlasts the test; Stop
// writes it): each session gets one entry, a JSON array of its own actions.
func TestJournalBatchesEachSessionIntoItsOwnEntry(t *testing.T) {
	j := startJournal(t, true, GatherWindow(time.Hour))
	counts := map[string]int{"s1": 10, "s2": 20, "s3": 5}
	before := ownWrites(j)
	for i := 1; i <= 20; i++ {
		for _, s := range []string{"s1", "s2", "s3"} {
			if i <= counts[s] {
				j.Record(click(s, i))
			}
		}
	}
	j.Stop()
	if w := ownWrites(j) - before; w != 3 {
		t.Errorf("three sessions' batch took %d registry writes, want 3", w)
	}
	for s, n := range counts {
		checkNewest(t, j.Actions(s, 0), s, 1, n)
		slots := slotsOf(j, s)
		var batch []Action
		if err := json.Unmarshal(slots[s+"/00"], &batch); len(slots) != 1 || err != nil || len(batch) != n {
			t.Errorf("%s's entries are %q (%v), want one array of %d actions under %s/00", s, slots, err, n, s)
		}
	}
}

// TestJournalRingKeepsTheNewestSlotsOfEachSession drives the writer batch
// by batch, sizes from 1 to 40, for more batches than there are slots: after
// each, the session shows its newest JournalSlots actions (all of them
// while fewer), and this node holds at most JournalSlots entries of it,
// with at most JournalSlots-1 actions beyond the newest JournalSlots.
func TestJournalRingKeepsTheNewestSlotsOfEachSession(t *testing.T) {
	j := startJournal(t, false)
	w := writer{j: j, sessions: map[string]*ring{}}
	recorded := 0
	for b := range 100 {
		size := []int{1, 3, 7, 1, 40, 2, 5, 33, 1, 1}[b%10]
		for range size {
			recorded++
			j.seq++
			a := click("s1", recorded)
			a.Seq, a.Node = j.seq, j.node
			w.add(entry{action: a})
		}
		w.flush()
		checkNewest(t, j.Actions("s1", 0), "s1", max(1, recorded-JournalSlots+1), recorded)
		slots, stored := slotsOf(j, "s1"), 0
		for _, v := range slots {
			var batch []Action
			if err := json.Unmarshal(v, &batch); err != nil || len(batch) == 0 || len(batch) > JournalSlots {
				t.Fatalf("batch %d: an entry holds %d actions (%v), want 1 to %d", b, len(batch), err, JournalSlots)
			}
			stored += len(batch)
		}
		if stored > min(recorded, 2*JournalSlots-1) {
			t.Fatalf("batch %d: %d actions stored in %d entries after %d recorded, want at most %d", b, stored, len(slots), recorded, 2*JournalSlots-1)
		}
	}
	w.forget("s1")
	if slots := slotsOf(j, "s1"); len(slots) != 0 || j.Len() != 0 {
		t.Fatalf("after forgetting s1, %d of its entries remain (%d in the journal)", len(slots), j.Len())
	}
}

// TestJournalReadsThePreviousReleasesSingleActionValues writes entries as
// a node of the previous release does, one Action object per key, beside
// this release's arrays: Actions shows both, in order, and skips a value
// that is neither.
func TestJournalReadsThePreviousReleasesSingleActionValues(t *testing.T) {
	j := startJournal(t, true)
	for i, key := range map[int]string{1: "s1/05", 3: "s1/06"} {
		a := click("s1", i)
		a.Node, a.Seq = "n1", uint64(100+i)
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.reg.Put(key, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.reg.Put("s1/07", []byte(`"not an action"`)); err != nil {
		t.Fatal(err)
	}
	j.Record(click("s1", 2))
	j.Record(click("s1", 4))
	eventually(t, "the recorded actions are shown", func() bool { return len(j.Actions("s1", 0)) >= 4 })
	got := j.Actions("s1", 0)
	var tools []string
	for _, a := range got {
		tools = append(tools, a.Tool)
	}
	if fmt.Sprint(tools) != "[t1 t2 t3 t4]" {
		t.Fatalf("Actions shows %v, want the old entries' t1 and t3 between the new t2 and t4, in time order", tools)
	}
}

// TestJournalForgetRemovesEveryEntry fills several of a session's slots,
// batch after batch, then forgets it: none of its entries remains, the
// other session's stay, and actions gathered before the Forget are not
// written after it while those recorded after it are.
func TestJournalForgetRemovesEveryEntry(t *testing.T) {
	j := startJournal(t, true)
	recorded := 0
	for range 6 {
		for range 9 {
			recorded++
			j.Record(click("s1", recorded))
		}
		last := "t" + strconv.Itoa(recorded)
		eventually(t, "s1's "+last+" is shown", func() bool {
			got := j.Actions("s1", 0)
			return len(got) > 0 && got[len(got)-1].Tool == last
		})
	}
	j.Record(click("s2", 1))
	eventually(t, "s2's action is shown", func() bool { return len(j.Actions("s2", 0)) == 1 })
	if n := len(slotsOf(j, "s1")); n < 2 {
		t.Fatalf("s1 has %d entries after 6 awaited batches, want several", n)
	}
	j.Forget("s1")
	eventually(t, "s1's entries are gone", func() bool { return len(slotsOf(j, "s1")) == 0 })
	if got := j.Actions("s2", 0); len(got) != 1 {
		t.Fatalf("forgetting s1 left s2 with %v", got)
	}

	// With a window that outlasts the test, the Forget comes in the same
	// batch as actions before and after it.
	k := startJournal(t, true, GatherWindow(time.Hour))
	for i := 1; i <= 5; i++ {
		k.Record(click("s1", i))
	}
	k.Forget("s1")
	k.Record(click("s1", 6))
	k.Record(click("s1", 7))
	k.Stop()
	checkNewest(t, k.Actions("s1", 0), "s1", 6, 7)
	k2 := startJournal(t, true, GatherWindow(time.Hour))
	k2.Record(click("s1", 1))
	k2.Forget("s1")
	k2.Stop()
	if k2.Len() != 0 {
		t.Fatalf("a session forgotten before its batch was written left %d entries", k2.Len())
	}
}

// TestJournalGathersWhatArrivesWithinTheWindow records an action, lets the
// writer take it, and records another: within the window both go into one
// registry write, and Stop writes them without waiting for the window to
// end.
func TestJournalGathersWhatArrivesWithinTheWindow(t *testing.T) {
	j := startJournal(t, true, GatherWindow(time.Hour))
	before := ownWrites(j)
	j.Record(click("s1", 1))
	eventually(t, "the writer takes the first action", func() bool { return len(j.queue) == 0 })
	j.Record(click("s1", 2))
	j.Stop()
	if w := ownWrites(j) - before; w != 1 {
		t.Errorf("two actions within the window took %d registry writes, want 1", w)
	}
	checkNewest(t, j.Actions("s1", 0), "s1", 1, 2)
}
