package mcpswarm_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// Draining a node whose name sorts first, while clients keep clicking its
// sessions through the other nodes, moves every session and loses no
// acknowledged click: the adopter's record supersedes the sender's by its
// handoff generation, so no duplicate-creation tie-break can stop the
// adopted copy. Calls during the handoff are retried by the entry node;
// the few that still fail say to retry, never to start over. Each session
// has a standby (the default R of 1), so each moves by promotion: the
// standby that held it takes it over from its copy, and then places a
// standby of its own, restoring R.
func TestDrainUnderLoadLosesNothing(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	standbys := map[string]string{}
	resp := drainUnderLoad(t, e, nodes, func(ids []string) {
		for _, id := range ids {
			eventually(t, 5*time.Second, id+" has an in-sync standby", func() bool {
				standbys[id] = standbyOf(t, nodes[0], id)
				return standbys[id] != ""
			})
		}
	})
	if int(resp.GetSessionsPromoted()) != len(resp.GetMoves()) {
		t.Errorf("drain promoted %d of %d moved sessions; want all", resp.GetSessionsPromoted(), len(resp.GetMoves()))
	}
	for _, m := range resp.GetMoves() {
		id, to := m.GetId(), m.GetNode()
		if !m.GetPromoted() || to != standbys[id] {
			t.Errorf("%s moved to %s (promoted: %v); want it promoted on its standby %s", id, to, m.GetPromoted(), standbys[id])
			continue
		}
		eventually(t, 5*time.Second, id+" has a standby again, placed by its new owner "+to, func() bool {
			s := standbyOf(t, e.nodes[to], id)
			return s != "" && s != to && s != "node1"
		})
	}
}

// Without standbys (--session-replicas 0) a drain copies each session to
// its adopter, with the same guarantees.
func TestDrainWithoutStandbysCopiesEverySession(t *testing.T) {
	e := newSwarmEnv(t)
	e.tweak = func(c *mcpswarm.Config) { c.SessionReplicas = 0 }
	resp := drainUnderLoad(t, e, e.cluster(3), nil)
	if resp.GetSessionsPromoted() != 0 {
		t.Errorf("drain promoted %d sessions with no standbys", resp.GetSessionsPromoted())
	}
	for _, m := range resp.GetMoves() {
		if m.GetPromoted() {
			t.Errorf("%s moved to %s by promotion with no standbys", m.GetId(), m.GetNode())
		}
	}
}

// drainUnderLoad starts twelve counter sessions on nodes[0], runs before
// (when set) with their ids, keeps clicking them through the other nodes
// while it drains nodes[0], and checks that every session moved and kept
// every acknowledged click, and that every failed call said to retry. It
// returns the drain's answer.
func drainUnderLoad(t *testing.T, e *swarmEnv, nodes []*mcpswarm.Node, before func(ids []string)) *adminv1.DrainResponse {
	t.Helper()
	owner := connect(t, nodes[0], connOpts{token: aliceToken})
	const sessions = 12
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("dl%d", i)
		if res := owner.call("swarm_start", map[string]any{"app": "counter", "id": ids[i]}); res.IsError {
			t.Fatal(textOf(res))
		}
	}
	entries := []*conn{connect(t, nodes[1], connOpts{token: aliceToken}), connect(t, nodes[2], connOpts{token: aliceToken})}
	for _, c := range entries {
		for _, id := range ids {
			eventually(t, 5*time.Second, "entry nodes see "+id, func() bool { return c.tools()[id+".inc.click"] })
		}
	}
	if before != nil {
		before(ids)
	}

	acked := make([]atomic.Int64, sessions)
	var failed atomic.Int64
	var failMu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := entries[i%2]
			// Paces the load (a click per 5 ms per session at most), so
			// the drain meets a steady stream rather than a flood.
			pace := time.NewTicker(5 * time.Millisecond)
			defer pace.Stop()
			for {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				req := mcp.CallToolRequest{}
				req.Params.Name = id + ".inc.click"
				res, err := c.CallTool(context.Background(), req)
				switch {
				case err != nil:
					failed.Add(1)
					failMu.Lock()
					failures = append(failures, err.Error())
					failMu.Unlock()
				case res.IsError:
					failed.Add(1)
					failMu.Lock()
					failures = append(failures, textOf(res))
					failMu.Unlock()
				default:
					acked[i].Add(1)
				}
			}
		}()
	}
	// The drain starts under load: every session has acknowledged clicks.
	sum := func() (n int64) {
		for i := range acked {
			n += acked[i].Load()
		}
		return n
	}
	await(t, 10*time.Second, "every session acknowledges clicks before the drain", func() error {
		for i := range acked {
			if acked[i].Load() < 3 {
				return fmt.Errorf("%s has %d", ids[i], acked[i].Load())
			}
		}
		return nil
	})
	key, _ := mcpswarm.LoadClusterKey(e.keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := adminv1.NewAdminServiceClient(dial(t, nodes[0], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	began := time.Now()
	resp, err := admin.Drain(ctx, &adminv1.DrainRequest{})
	took := time.Since(began)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	// The load goes on past the drain, on the new owners.
	atDrain := sum()
	eventually(t, 10*time.Second, "clicks are acknowledged after the drain", func() bool { return sum() >= atDrain+int64(3*sessions) })
	close(stop)
	wg.Wait()
	if resp.GetSessionsMoved() != sessions || resp.GetSessionsKept() != 0 || resp.GetSessionsStopped() != 0 {
		t.Errorf("drain reported moved %d, kept %d, lost %d; want %d, 0, 0", resp.GetSessionsMoved(), resp.GetSessionsKept(), resp.GetSessionsStopped(), sessions)
	}
	var total int64
	for i, id := range ids {
		total += acked[i].Load()
		var model string
		eventually(t, 5*time.Second, id+" is listed with a new owner on every node", func() bool {
			for _, c := range entries {
				if o := c.listed()[id]; o == "" || o == "node1" {
					return false
				}
			}
			return true
		})
		model = textOf(entries[0].call("swarm_get_model", map[string]any{"id": id}))
		if want := fmt.Sprintf(`"count":%d`, acked[i].Load()); !strings.Contains(model, want) {
			t.Errorf("%s: model %s after %d acknowledged clicks", id, model, acked[i].Load())
		}
	}
	for _, f := range failures {
		if !strings.Contains(f, "retry") {
			t.Errorf("a call failed with an answer that is not retryable: %s", f)
		}
	}
	var moves []time.Duration
	for _, m := range resp.GetMoves() {
		moves = append(moves, m.GetTook().AsDuration())
	}
	slices.Sort(moves)
	if len(moves) > 0 {
		t.Logf("drain of %d sessions took %v (%d promoted); per session %v median, %v max; %d clicks acknowledged, %d failed",
			sessions, took, resp.GetSessionsPromoted(), moves[len(moves)/2], moves[len(moves)-1], total, failed.Load())
	}
	return resp
}
