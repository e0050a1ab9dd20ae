package mcpswarm_test

import (
	"net/http"
	"os"
	"runtime"
	"testing"
)

// nodeBytesPerIdleConnection opens n MCP connections to one node with
// bare HTTP initializes (the client keeps nothing but the ids) and returns
// the live heap they add to the process, per connection, once idle.
func nodeBytesPerIdleConnection(t testing.TB, n int) float64 {
	e := newSwarmEnv(t)
	e.limit("limits:\n  connections_per_principal: 1000000\n  initializes_per_minute: 1000000\n")
	node := e.start("node1")
	open := func() string {
		status, body, id := rawInitialize(t, node, aliceToken)
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize answered %d %s", status, body)
		}
		return id
	}
	// Warm the node up so lazily built state is not charged to the
	// connections.
	for range 20 {
		open()
	}
	var before, after runtime.MemStats
	settle := func(ms *runtime.MemStats) {
		http.DefaultClient.CloseIdleConnections()
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(ms)
	}
	ids := make([]string, 0, n)
	settle(&before)
	for range n {
		ids = append(ids, open())
	}
	settle(&after)
	writeHeapProfile(t, os.Getenv("IDLECONN_PROFILE"))
	runtime.KeepAlive(ids)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkIdleConnectionOnANode is the in-process counterpart of
// bench-compare's "KB per idle connection": the live heap 1,000 idle
// Streamable HTTP connections add to a node, per connection.
// IDLECONN_PROFILE=FILE writes the heap profile at the measuring point (run
// with -memprofilerate=1).
func BenchmarkIdleConnectionOnANode(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(nodeBytesPerIdleConnection(b, 1000), "heap-B/conn")
	}
}
