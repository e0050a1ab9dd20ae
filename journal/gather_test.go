package journal

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// putAll runs one Put per key at once and waits for all of them.
func putAll(t *testing.T, j *Journal, keys ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := j.Put(k, []byte("v-"+k)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// finishes runs fn and fails the test with what if fn has not returned
// within 30 s (a wait the journal should not have made).
func finishes(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
}

// A writer alone never waits to gather: its rounds hold one write, so
// even an hour's Gather costs it nothing.
func TestALoneWriterNeverWaitsToGather(t *testing.T) {
	j, err := Open(t.TempDir(), Options{Logger: quiet, Gather: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	finishes(t, "a lone writer waited to gather", func() {
		for i := range 20 {
			if err := j.Put(fmt.Sprintf("k%d", i), []byte("v")); err != nil {
				t.Error(err)
			}
		}
	})
	if st := j.Stats(); st.Rounds != 20 || st.Records != 20 {
		t.Fatalf("%d records in %d rounds, want one round each", st.Records, st.Rounds)
	}
}

// After a round of several writes, the next round waits for one writer
// more than that, then commits them with one fdatasync: here four writers
// after a round of three, under an hour's Gather, answer at once.
func TestAGatheringRoundCommitsOnceItsWritersHaveJoined(t *testing.T) {
	j, err := Open(t.TempDir(), Options{Logger: quiet, Gather: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.mu.Lock()
	j.gather.committed(3, false) // as if the last round had held three writes
	j.mu.Unlock()
	finishes(t, "a round that had its writers kept waiting", func() { putAll(t, j, "a", "b", "c", "d") })
	if st := j.Stats(); st.Rounds != 1 || st.Records != 4 {
		t.Fatalf("%d records in %d rounds, want 4 in 1", st.Records, st.Rounds)
	}
	got := contents(t, j)
	for _, k := range []string{"a", "b", "c", "d"} {
		if got[k] != "v-"+k {
			t.Fatalf("%s = %q after the gathered round", k, got[k])
		}
	}
}

// A round whose writers do not all come waits Gather, no longer, and
// commits what it has.
func TestAGatheringRoundWaitsForGatherThenCommits(t *testing.T) {
	const gather = 20 * time.Millisecond
	j, err := Open(t.TempDir(), Options{Logger: quiet, Gather: gather})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.mu.Lock()
	j.gather.committed(3, false)
	j.mu.Unlock()
	began := time.Now()
	if err := j.Put("only", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < gather {
		t.Errorf("a short round committed after %v, before its gathering (%v) ended", waited, gather)
	}
	if st := j.Stats(); st.Rounds != 1 || st.Records != 1 {
		t.Errorf("%d records in %d rounds, want the one write committed", st.Records, st.Rounds)
	}
	if got := contents(t, j); got["only"] != "v" {
		t.Errorf("after the round: %v", got)
	}
}
