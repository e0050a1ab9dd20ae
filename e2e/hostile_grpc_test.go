package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// heapInuse reads go_memstats_heap_inuse_bytes from the node's /metrics.
func heapInuse(t *testing.T, n *runningNode) int64 {
	t.Helper()
	return int64(metricValue(t, n, "go_memstats_heap_inuse_bytes "))
}

const mib = 1 << 20

// Issue #13: one TCP connection with many gRPC streams, each declaring a
// 4 MiB message and never sending its last byte, made the node buffer
// every message before any credential was checked (+1.1 GiB for 400
// streams). Streams to the peer API without the peer credential must now
// be refused from their headers, before anything is read.
func TestHostileGRPCPartialMessagesToPeerAPI(t *testing.T) {
	bin := buildNode(t)
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	n := startNode(t, bin, "--grpc", grpcAddr)
	base := heapInuse(t, n)

	const streams, declared = 64, 4 * mib
	h, err := dialStallingH2(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.open("/mcpswarm.peer.v1.PeerService/ExchangeDigest", streams, declared, time.Now().Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	growth := heapInuse(t, n) - base
	ended, open, held := h.counts(declared)
	t.Logf("%d streams × %d MiB declared: server ended %d, %d open holding %d MiB sent; node heap in use grew %d MiB",
		streams, declared/mib, ended, open, held/mib, growth/mib)
	if open > 0 {
		t.Errorf("%d unauthenticated peer streams are still open with %d MiB sent; want every one refused from its headers", open, held/mib)
	}
	if growth > 48*mib {
		t.Errorf("node heap grew %d MiB holding unauthenticated partial messages; want < 48 MiB", growth/mib)
	}
	// The refusals are counted and logged (once per 10 s), not silent.
	if got := metricValue(t, n, `mcpswarm_grpc_streams_refused_total{reason="peer_credential"}`); got < streams {
		t.Errorf("mcpswarm_grpc_streams_refused_total{peer_credential} = %v; want >= %d", got, streams)
	}
	if !strings.Contains(n.Log.String(), "refusing gRPC streams before reading them") {
		t.Error("the node logged nothing about the refused streams")
	}
}

// The methods anyone may call (health, reflection) are bounded instead:
// a few concurrent streams, each ended at a deadline, so what they can make
// the node hold is small and temporary.
func TestHostileGRPCPartialMessagesToOpenMethods(t *testing.T) {
	bin := buildNode(t)
	grpcAddr := fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	n := startNode(t, bin, "--grpc", grpcAddr)
	base := heapInuse(t, n)

	const streams, declared = 64, 4 * mib
	h, err := dialStallingH2(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	start := time.Now()
	if err := h.open("/grpc.health.v1.Health/Check", streams, declared, start.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	growth := heapInuse(t, n) - base
	ended, open, held := h.counts(declared)
	t.Logf("%d health streams × %d MiB declared: server ended %d at once, %d open holding %d MiB sent; node heap in use grew %d MiB",
		streams, declared/mib, ended, open, held/mib, growth/mib)
	// 16 admitted streams × 4 MiB, plus garbage not yet collected.
	if growth > 112*mib {
		t.Errorf("node heap grew %d MiB holding anonymous partial messages; want < 112 MiB", growth/mib)
	}
	if open > 16 {
		t.Errorf("%d anonymous streams held at once; want at most 16", open)
	}
	// Every admitted stream ends at its 30 s deadline, freeing its buffer.
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, open, _ = h.counts(declared); open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d anonymous stalled streams still open after %s; want them ended by the server's deadline", open, time.Since(start).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the server ended every stalled anonymous stream %s after it opened", time.Since(start).Round(time.Second))
}
