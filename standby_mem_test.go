package mcpswarm_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"

	"github.com/mcpswarm/mcpswarm"
)

// clusterBytesPerSession starts n counter sessions on node1 of a two-node
// cluster whose nodes keep `replicas` standbys per session, waits until
// node2's registry holds every one (and, with a standby, until node1 counts
// node2's copy of each in sync and node2's record names it), and returns
// the live heap the two nodes gained per session, once idle. Both nodes and
// the client share this process, so the figure is the cluster's: what
// node2 holds and what node1 keeps to ship to it.
func clusterBytesPerSession(t testing.TB, n, replicas int) float64 {
	e := newSwarmEnv(t)
	e.limit(fmt.Sprintf("limits:\n  sessions_per_principal: %d\n  calls_per_second: 100000\n  call_burst: 100000\n", n+1))
	e.tweak = func(c *mcpswarm.Config) { c.SessionReplicas = replicas }
	nodes := e.cluster(2)
	// The cluster is collected before the caller measures another one:
	// what it still held then (a finalizer's or a timer's reference) would
	// be freed during that measurement and shrink its figure.
	gone := []weak.Pointer[mcpswarm.Node]{weak.Make(nodes[0]), weak.Make(nodes[1])}
	defer eventually(t, 20*time.Second, "the measured cluster collected", func() bool {
		runtime.GC()
		return gone[0].Value() == nil && gone[1].Value() == nil
	})
	defer e.stopAll()
	c := connect(t, nodes[0], connOpts{token: aliceToken})
	defer c.Close() // before the nodes stop (deferred calls run last first)
	held := func(id string) bool {
		if replicas == 0 {
			return true
		}
		return slices.Equal(nodes[0].SessionStandbys(id), []string{"node2"}) &&
			slices.Equal(mcpswarm.RecordedStandbys(nodes[1], id), []string{"node2"})
	}
	// One session first, so lazily built per-node state (the standby
	// journal, the shipper's connection to node2) is not counted.
	if res := c.call("swarm_start", map[string]any{"app": "counter", "id": "warm"}); res.IsError {
		t.Fatal(textOf(res))
	}
	// node2's registry, read directly: an MCP connection there would queue
	// a list_changed notification per session and count it.
	recorded := func(k int) bool { return nodes[1].Footprint().Sessions == k }
	eventually(t, 10*time.Second, "the warm-up session replicated", func() bool { return recorded(1) && held("warm") })
	var before, after runtime.MemStats
	settle := func(ms *runtime.MemStats) {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(ms)
	}
	settle(&before)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%04d", i)
		if res := c.call("swarm_start", map[string]any{"app": "counter", "id": ids[i]}); res.IsError {
			t.Fatal(textOf(res))
		}
	}
	eventually(t, 20*time.Second, "node2 lists every session and holds its standby copy", func() bool {
		return recorded(n+1) && !slices.ContainsFunc(ids, func(id string) bool { return !held(id) })
	})
	settle(&after)
	if replicas > 0 {
		writeHeapProfile(t, os.Getenv("STANDBYMEM_PROFILE"))
	}
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// BenchmarkStandbyCopyOnACluster is what a standby costs in memory: the
// live heap 400 idle counter sessions add to a two-node cluster with
// --session-replicas 1 (each session's standby on the other node), less
// what they add with --session-replicas 0 (the other node still holds
// each session's record). The difference is the standby's copy, its
// journal entry's index and the owner's shipping state.
// STANDBYMEM_PROFILE=FILE writes the heap profile of the cluster with
// standbys at its measuring point (run with -memprofilerate=1).
func BenchmarkStandbyCopyOnACluster(b *testing.B) {
	const n = 400
	for b.Loop() {
		with := clusterBytesPerSession(b, n, 1)
		without := clusterBytesPerSession(b, n, 0)
		b.ReportMetric(with, "heap-B/session(R=1)")
		b.ReportMetric(without, "heap-B/session(R=0)")
		b.ReportMetric(with-without, "heap-B/standby")
	}
}
