package mcpswarm_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A long-lived connection must not grow the node per call. Two ways it
// did: mcp-go's server, with an event store configured, kept every POST it
// answered as SSE as a resumable stream until the connection ended (~4 KB
// a call); and the front's own dispatcher, flushing an SSE answer apart
// from the body's end, made a client that stops reading at its answer
// drop the connection, so each call left a closed connection behind for
// the server's deadlines to collect.
func TestLongLivedConnectionKeepsNothingPerCall(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap over 16,000 calls")
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	measure := func(t *testing.T, warm, calls int, call func()) {
		t.Helper()
		// Warm: pools, maps, buffers and the registries' bounded delta
		// logs and arena slack reach their size.
		for range warm {
			call()
		}
		before := heap()
		for range calls {
			call()
		}
		after := heap()
		perCall := (float64(after) - float64(before)) / float64(calls)
		t.Logf("heap %d → %d bytes over %d calls: %.0f B per call", before, after, calls, perCall)
		if perCall > 200 {
			t.Fatalf("the node kept %.0f B per call on one connection (bound 200 B): per-call state outlives the call", perCall)
		}
	}
	// withCounter starts a node and, through one connection, a counter
	// session id: the start sends tools/list_changed on the call's own
	// stream, so the connection has had a notification.
	withCounter := func(t *testing.T, id string) *conn {
		t.Helper()
		c := connect(t, newSwarmEnv(t).start("node1"), connOpts{token: aliceToken})
		if res := c.call("swarm_start", map[string]any{"app": "counter", "id": id}); res.IsError {
			t.Fatal(textOf(res))
		}
		return c
	}
	t.Run("static calls after a notification", func(t *testing.T) {
		c := withCounter(t, "long")
		measure(t, 200, 2000, func() { c.listed() })
	})
	t.Run("clicks that notify the clicking connection", func(t *testing.T) {
		c := withCounter(t, "sub")
		sub := mcp.SubscribeRequest{}
		sub.Params.URI = "swarm://session/sub/model/count"
		if err := c.Subscribe(context.Background(), sub); err != nil {
			t.Fatal(err)
		}
		// Each click's resources/updated reaches this connection while its
		// own POST runs (or right after, and then rides on the next POST).
		// A click writes the UI's action journal too (gathered into a
		// registry entry per 20 ms), whose bounded delta log and arena
		// fill only after some 10,000 clicks: with 1,000 warm-up clicks and
		// 3,000 measured the node "kept" 170–195 B a click that it gives
		// back later (45 B a click over 20,000), so the window is long
		// enough for a real per-call leak to stand out of that filling.
		heard := 0
		measure(t, 4000, 12000, func() {
			if res := c.call("sub.inc.click", nil); res.IsError {
				t.Fatal(textOf(res))
			}
			// The test's client keeps what it hears in a buffer: empty it,
			// so the heap measured is the node's.
			for len(c.notes.ch) > 0 {
				if n := <-c.notes.ch; n.Method == string(mcp.MethodNotificationResourceUpdated) {
					heard++
				}
			}
		})
		if heard < 3000 {
			t.Fatalf("the client heard %d resources/updated over 4,000 clicks: notifications were lost", heard)
		}
	})
}
