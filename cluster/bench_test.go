package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/crdt/crdtpb"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// benchConfig is LocalConfig with the production batching delay and an
// in-memory store (persistence is measured by BenchmarkPutBolt).
func benchConfig(c *Config) {
	c.BatchDelay = DefaultConfig().BatchDelay
	c.DataDir = ""
}

func startBenchCluster(b *testing.B, n int) []*tnode {
	b.Helper()
	nodes := []*tnode{startNode(b, nil, "n0", "", benchConfig)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startNode(b, nil, fmt.Sprintf("n%d", i), "", benchConfig, joinTo(nodes[0])))
	}
	awaitMembers(b, nodes, 30*time.Second)
	eventually(b, 30*time.Second, func() error {
		for _, nd := range nodes {
			if !nd.c.Ready() {
				return fmt.Errorf("%s not ready", nd.name)
			}
		}
		return nil
	})
	return nodes
}

// visibility tracks, per key, how many nodes still have to see it.
type visibility struct {
	mu      sync.Mutex
	waiting map[string]*waiter
}

type waiter struct {
	left int
	done chan struct{}
}

func (v *visibility) expect(key string, nodes int) chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := &waiter{left: nodes, done: make(chan struct{})}
	v.waiting[key] = w
	return w.done
}

func (v *visibility) seen(ch crdt.Change) {
	if ch.New == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if w := v.waiting[ch.Key]; w != nil {
		if w.left--; w.left == 0 {
			close(w.done)
			delete(v.waiting, ch.Key)
		}
	}
}

// BenchmarkUpdateVisible measures the time from a Put on one node until
// every other node has applied it, and the replication bytes per update.
func BenchmarkUpdateVisible(b *testing.B) {
	for _, n := range []int{3, 5, 10} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			if n == 10 && testing.Short() {
				b.Skip("10 nodes: skipped in -short")
			}
			nodes := startBenchCluster(b, n)
			vis := &visibility{waiting: map[string]*waiter{}}
			for _, nd := range nodes {
				nd.regs["tools"].OnChange(vis.seen)
			}
			sent := func() float64 {
				s := 0.0
				for _, nd := range nodes {
					s += metric(b, nd.prom, "mcpswarm_cluster_bytes_sent_total")
				}
				return s
			}
			value := make([]byte, 64)
			lat := make([]time.Duration, 0, b.N)
			bytes0 := sent()
			b.ResetTimer()
			for i := range b.N {
				key := fmt.Sprintf("k%08d", i)
				done := vis.expect(key, n-1)
				w := nodes[i%n]
				start := time.Now()
				if err := w.regs["tools"].Put(key, value); err != nil {
					b.Fatal(err)
				}
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					b.Fatalf("update %s not visible everywhere after 10s", key)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			perUpdate := (sent() - bytes0) / float64(b.N*(n-1))
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
			b.ReportMetric(perUpdate, "wire-B/update/peer")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkPushMessageOverhead reports the encoded bytes of a push carrying
// one put or one removal beyond its key and value, as the ReplicateRequest
// goes on the stream after the stream's opening position has declared the
// origin and the registry (the deltas then name both by one-byte refs), and
// leaving out the sender, as every push after the first does. The "text-"
// figures are the same pushes with the origin and registry spelled out in
// each delta, as before per-stream declarations.
func BenchmarkPushMessageOverhead(b *testing.B) {
	o := crdt.Origin{Name: "mcpswarm-0", Epoch: uint64(time.Now().UnixMilli())<<16 | 0xbeef}
	key, value := "session-0123456789abcdef", make([]byte, 200)
	put := crdt.Delta{Origin: o, From: 41, To: 42, Puts: []crdt.Put{{Key: key, Value: value, Seq: 42}}}
	rm := crdt.Delta{Origin: o, From: 42, To: 43, Removes: []crdt.Removal{{Key: key, Seq: 42}}}
	// In a batch of 32 puts of one origin, merged into one delta.
	batched := crdt.Delta{Origin: o, From: 100, To: 132}
	payload := 0
	for i := range 32 {
		k := fmt.Sprintf("session-%016d", i)
		batched.Puts = append(batched.Puts, crdt.Put{Key: k, Value: value, Seq: uint64(101 + i)})
		payload += len(k) + len(value)
	}
	push := func(d crdt.Delta) *peerv1.ReplicateRequest {
		return &peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{deltaToPB("sessions", d)}}
	}
	var enc crdtpb.StreamEncoder
	opening := enc.Encode(&peerv1.ReplicateRequest{Sender: o.String(), Deltas: []*peerv1.Delta{deltaToPB("sessions", crdt.Delta{Origin: o, From: 41, To: 41})}})
	if len(opening.GetOrigins()) != 1 || len(opening.GetRegistries()) != 1 {
		b.Fatalf("opening position declares %v", opening)
	}
	var p, r, bp, tp, tr, tbp int
	for b.Loop() {
		p = proto.Size(enc.Encode(push(put)))
		r = proto.Size(enc.Encode(push(rm)))
		bp = proto.Size(enc.Encode(push(batched)))
		tp = proto.Size(push(put))
		tr = proto.Size(push(rm))
		tbp = proto.Size(push(batched))
	}
	b.ReportMetric(float64(p-len(key)-len(value)), "put-overhead-B")
	b.ReportMetric(float64(r-len(key)), "remove-overhead-B")
	b.ReportMetric(float64(bp-payload)/32, "batched-put-overhead-B")
	b.ReportMetric(float64(tp-len(key)-len(value)), "text-put-overhead-B")
	b.ReportMetric(float64(tr-len(key)), "text-remove-overhead-B")
	b.ReportMetric(float64(tbp-payload)/32, "text-batched-put-overhead-B")
}

// BenchmarkColdJoin100k measures how long a new node takes to hold all
// 100k entries of a two-node cluster.
func BenchmarkColdJoin100k(b *testing.B) {
	const entries = 100_000
	nodes := startBenchCluster(b, 2)
	value := make([]byte, 64)
	for i := range entries {
		if err := nodes[i%2].regs["tools"].Put(fmt.Sprintf("entry-%06d", i), value); err != nil {
			b.Fatal(err)
		}
	}
	eventually(b, 60*time.Second, func() error {
		for _, nd := range nodes {
			if got := nd.regs["tools"].Len(); got != entries {
				return fmt.Errorf("%s holds %d", nd.name, got)
			}
		}
		return nil
	})
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		j := startNode(b, nil, fmt.Sprintf("joiner%d", i), "", benchConfig, joinTo(nodes[0]))
		eventually(b, 60*time.Second, func() error {
			if got := j.regs["tools"].Len(); got != entries {
				return fmt.Errorf("joiner holds %d", got)
			}
			return nil
		})
		total += time.Since(start)
		b.StopTimer()
		j.stop()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "join-s")
}

// BenchmarkPutBolt measures a local Put persisted to bbolt with fsync.
func BenchmarkPutBolt(b *testing.B) {
	n := startNode(b, nil, "n0", "", func(c *Config) { c.NoSync = false })
	value := make([]byte, 64)
	b.ResetTimer()
	for i := range b.N {
		if err := n.regs["tools"].Put(fmt.Sprintf("k%08d", i), value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeerCredentialCheck is the check every forwarded call and every
// replication stream passes twice (the node's gRPC gate, then the
// cluster's handlers): deriving the peer key and computing the HMAC per
// call (the gate before), the HMAC per call (the handlers before), and the
// verifier remembering each member's credential.
func BenchmarkPeerCredentialCheck(b *testing.B) {
	key := bytes.Repeat([]byte{9}, 32)
	k, err := deriveKeys(key)
	if err != nil {
		b.Fatal(err)
	}
	md := metadata.Pairs(MDPeerName, "node-a", MDPeerCredential, credential(k.peer, "node-a"))
	ctx := metadata.NewIncomingContext(context.Background(), md)
	v := newPeerVerifier(k.peer)
	for _, bm := range []struct {
		name string
		fn   func() bool
	}{
		{"derive-each-call", func() bool {
			pc, err := PeerCredentials(key, md.Get(MDPeerName)[0])
			if err != nil {
				return false
			}
			want, _ := pc.GetRequestMetadata(context.Background())
			return hmac.Equal([]byte(want[MDPeerCredential]), []byte(md.Get(MDPeerCredential)[0]))
		}},
		{"hmac-each-call", func() bool {
			m, _ := metadata.FromIncomingContext(ctx)
			return hmac.Equal([]byte(credential(k.peer, m.Get(MDPeerName)[0])), []byte(m.Get(MDPeerCredential)[0]))
		}},
		{"verifier", func() bool { _, err := authenticate(ctx, v); return err == nil }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !bm.fn() {
					b.Fatal("the credential did not verify")
				}
			}
		})
	}
}

// BenchmarkInSync measures the freshness check every request makes
// (CanServe) on a member of three, from every core at once: "memo" is the
// usual case, an in-sync verdict answered from its memo; "computed" makes
// every call recompute it (leases' lock, a copy of the member list), as
// every call did before the memo.
func BenchmarkInSync(b *testing.B) {
	nodes := startBenchCluster(b, 3)
	c := nodes[0].c
	eventually(b, 30*time.Second, c.InSync)
	for _, mode := range []string{"memo", "computed"} {
		b.Run(mode, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if mode == "computed" {
						c.syncGen.Add(1)
					}
					if err := c.InSync(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
