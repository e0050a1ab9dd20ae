package mcpswarm_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// nodeBytesPerIdleSession starts n counter sessions on one node through
// MCP and returns the live heap and goroutine stacks they add, per session,
// once idle. The client runs in this process too; what it keeps of one
// connection is noise over n sessions.
func nodeBytesPerIdleSession(t testing.TB, n int) (heap, stack, allocated float64) {
	e := newSwarmEnv(t)
	e.limit(fmt.Sprintf("limits:\n  sessions_per_principal: %d\n  calls_per_second: 100000\n  call_burst: 100000\n", n+1))
	node := e.start("node1")
	c := connect(t, node, connOpts{token: aliceToken})
	// One session first, so lazily built per-node state is not counted.
	if res := c.call("swarm_start", map[string]any{"app": "counter", "id": "warm"}); res.IsError {
		t.Fatal(textOf(res))
	}
	var before, after runtime.MemStats
	settle := func(ms *runtime.MemStats) {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(ms)
	}
	settle(&before)
	for i := range n {
		if res := c.call("swarm_start", map[string]any{"app": "counter", "id": fmt.Sprintf("i%04d", i)}); res.IsError {
			t.Fatal(textOf(res))
		}
	}
	// The publisher writes the registries within milliseconds; wait for it.
	eventually(t, 10*time.Second, "every session published", func() bool { return len(c.listed()) >= n+1 })
	settle(&after)
	writeHeapProfile(t, os.Getenv("IDLEMEM_PROFILE"))
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n),
		float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n),
		float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

// BenchmarkIdleSessionOnANode is the in-process counterpart of
// bench-compare's "KB per idle counter session" (RSS of a separate
// process, which adds the garbage collector's headroom): the live heap and
// goroutine stacks 400 idle counter sessions add to a node, per session.
// IDLEMEM_PROFILE=FILE writes the heap profile at the measuring point (run
// with -memprofilerate=1).
func BenchmarkIdleSessionOnANode(b *testing.B) {
	for b.Loop() {
		heap, stack, allocated := nodeBytesPerIdleSession(b, 400)
		b.ReportMetric(heap, "heap-B/session")
		b.ReportMetric(stack, "stack-B/session")
		b.ReportMetric(allocated, "alloc-B/start")
	}
}

// writeHeapProfile writes the process's heap profile to file, when named.
func writeHeapProfile(t testing.TB, file string) {
	t.Helper()
	if file == "" {
		return
	}
	w, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := pprof.WriteHeapProfile(w); err != nil {
		t.Fatal(err)
	}
}
