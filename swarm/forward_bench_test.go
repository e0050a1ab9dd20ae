package swarm

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForwardedClick is a counter click driven through node B's swarm
// on a session node A owns (every call forwarded over the real gRPC peer
// connection), beside the same click on a session B owns itself, in the
// same run: the forward's added latency (ns/op at one client) and CPU
// (cpu-µs/op, both nodes being this process) is the difference. Neither
// node journals, so the figures are the call path's, not the disk's.
func BenchmarkForwardedClick(b *testing.B) {
	a := startTestNode(b, "a", false)
	nb := startTestNode(b, "b", false, a.cl.Self().GossipAddr)
	awaitPeers(b, a, nb)
	ctx := context.Background()
	alice := authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}, Transport: authz.TransportStreamableHTTP}
	const sessions = 16
	for i := range sessions {
		if _, err := a.sw.Start(ctx, alice, "counter", fmt.Sprintf("fa%d", i)); err != nil {
			b.Fatal(err)
		}
		if _, err := nb.sw.Start(ctx, alice, "counter", fmt.Sprintf("lb%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	await(b, "B sees A's sessions", func() bool { _, ok := nb.sw.locate(fmt.Sprintf("fa%d", sessions-1)); return ok })
	click := func(b *testing.B, id string) {
		res, err := nb.sw.Call(ctx, alice, id, id+".inc.click", nil)
		if err != nil || res.IsError {
			b.Fatalf("click %s: %+v %v", id, res, err)
		}
	}
	for _, bm := range []struct{ name, prefix string }{{"local", "lb"}, {"forwarded", "fa"}} {
		b.Run(bm.name+"/1client", func(b *testing.B) {
			id := bm.prefix + "0"
			click(b, id)
			b.ReportAllocs()
			began := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				click(b, id)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-began).Microseconds())/float64(b.N), "cpu-µs/op")
		})
		b.Run(bm.name+"/16clients", func(b *testing.B) {
			var next atomic.Int32
			b.ReportAllocs()
			b.SetParallelism(sessions / 2) // 16 goroutines on 2 cores
			began := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("%s%d", bm.prefix, next.Add(1)%sessions)
				for pb.Next() {
					click(b, id)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-began).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
