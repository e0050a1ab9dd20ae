package ui

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// BenchmarkJournalWriter measures what one journaled action costs the node
// from Record until the registry holds it: 16 sessions clicked in turn, as
// by 16 agents, in bursts of up to a queue's worth (256, so none is
// dropped), each awaited before the next. Per action: ns/op (wall), cpu-ns/op
// (the process's CPU time, every goroutine's), allocs/op and
// registry-writes/op (the CRDT deltas this node produced).
func BenchmarkJournalWriter(b *testing.B) {
	j := startJournal(b, true)
	const sessions, burst = 16, 256
	names := make([]string, sessions)
	for i := range names {
		names[i] = "bench" + strconv.Itoa(i)
	}
	// The last action of a burst is written when a value carrying its
	// seq shows up (seq is an Action's last field, so `"seq":N}` names
	// exactly one action, in either format).
	var want atomic.Pointer[[]byte]
	written := make(chan struct{}, 1)
	j.reg.OnChange(func(ch crdt.Change) {
		if w := want.Load(); w != nil && bytes.Contains(ch.New, *w) {
			want.Store(nil)
			written <- struct{}{}
		}
	})
	self := func() uint64 {
		for _, v := range j.reg.Digest() {
			if v.Origin.Name == "n1" {
				return v.Seq
			}
		}
		return 0
	}
	a := Action{Tool: "app.inc.click", Source: SourceAgent, Principal: "alice", At: time.Now().UTC()}
	seq0, cpu0 := self(), cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(burst, b.N-done)
		// Record numbers actions 1, 2, ... in order: the burst's last is
		// done+n.
		needle := []byte(`"seq":` + strconv.Itoa(done+n) + `}`)
		want.Store(&needle)
		for i := range n {
			a.Session = names[(done+i)%sessions]
			j.Record(a)
		}
		select {
		case <-written:
		case <-time.After(10 * time.Second):
			b.Fatalf("action %d not written after 10 s", done+n)
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(self()-seq0)/float64(b.N), "registry-writes/op")
}
