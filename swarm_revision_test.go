package mcpswarm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// A subscriber on another node hears a burst of clicks on a session, and
// the burst's last change reaches it after the last click was answered:
// the owner merges revision-only record writes (one per session per
// revisionGap), and the merged one must still go out.
func TestRemoteSubscriberHearsTheLastRevisionOfABurst(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	owner := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := owner.call("swarm_start", map[string]any{"app": "counter", "id": "burst"}); res.IsError {
		t.Fatal(textOf(res))
	}
	watcher := connect(t, nodes[1], connOpts{token: aliceToken, listen: true})
	eventually(t, 10*time.Second, "node2 lists the session", func() bool { return watcher.listed()["burst"] != "" })
	const uri = "swarm://session/burst/model/count"
	var mu sync.Mutex
	var heard []time.Time
	watcher.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/resources/updated" && n.Params.AdditionalFields["uri"] == uri {
			mu.Lock()
			heard = append(heard, time.Now())
			mu.Unlock()
		}
	})
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = uri
	if err := watcher.Subscribe(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	const clicks = 40
	var lastSent time.Time
	for i := range clicks {
		if i == clicks-1 {
			// Stamped before the last click is sent, not after its answer
			// returns: on a loaded machine the caller may wake after the
			// last click's notification already reached node2 (a click
			// that followed a quiet gap is written at once).
			lastSent = time.Now()
		}
		if res := owner.call("burst.inc.click", nil); res.IsError {
			t.Fatal(textOf(res))
		}
	}
	eventually(t, 10*time.Second, "node2's subscriber hears a change after the last click", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(heard) > 0 && heard[len(heard)-1].After(lastSent)
	})
	mu.Lock()
	t.Logf("%d clicks, %d notifications on the other node", clicks, len(heard))
	mu.Unlock()
}
