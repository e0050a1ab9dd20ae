package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/mcpconn"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
	"github.com/mcpswarm/mcpswarm/bench/internal/swarmproc"
)

// awaitDead waits until every live node's metrics count a dead member.
func (r *runner) awaitDead(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, nd := range r.c.Live() {
		for {
			m, err := swarmproc.Metrics(ctx, r.hc, nd)
			if err == nil && m[`mcpswarm_cluster_members{state="dead"}`] >= 1 {
				break
			}
			if err := procwait.Sleep(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for %s to declare the killed node dead: %w", nd.Name, err)
			}
		}
	}
	return nil
}

// approvals starts a counter session on every live node the run holds a
// connection to and has one client per node approve its inc over and
// over for k.approve: each round an input_required answer with a fresh
// request state, then the call again with the state and an acceptance,
// which the arbiter spends.
func (r *runner) approvals(ctx context.Context, res *result) error {
	type asker struct{ url, tool string }
	var askers []asker
	for i, cn := range r.conns {
		nd := r.c.Nodes[i]
		if !nd.Alive() {
			continue
		}
		id := fmt.Sprintf("ask%02d", i+1)
		if err := cn.CallTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
			return fmt.Errorf("%s: swarm_start %s: %w", nd.Name, id, err)
		}
		askers = append(askers, asker{nd.BaseURL + "/mcp", id + ".inc.click"})
	}
	approve := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	actx, cancel := context.WithTimeout(ctx, r.k.approve)
	defer cancel()
	var done, refused atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	began := time.Now()
	for _, a := range askers {
		wg.Go(func() {
			for actx.Err() == nil {
				first, err := mcpconn.CallStateless(actx, r.hc, a.url, token, "bench-realscale", a.tool, "", nil)
				if err != nil {
					if actx.Err() == nil {
						failed.Store(fmt.Errorf("asking for %s: %w", a.tool, err))
					}
					return
				}
				state, _ := first["requestState"].(string)
				if first["resultType"] != "input_required" || state == "" {
					failed.Store(fmt.Errorf("%s did not answer input_required: %v", a.tool, first))
					return
				}
				// The answer is not cut short: an approval asked for is
				// counted when it is decided.
				ok, err := mcpconn.CallStateless(context.WithoutCancel(actx), r.hc, a.url, token, "bench-realscale", a.tool, state, approve)
				switch {
				case err != nil:
					failed.Store(fmt.Errorf("approving %s: %w", a.tool, err))
					return
				case ok["isError"] == true:
					if refused.Add(1) == 1 {
						slog.Warn("an approved call was refused", "tool", a.tool, "result", ok)
					}
				default:
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	res.Approvals = float64(done.Load()) / time.Since(began).Seconds()
	res.Refused = int(refused.Load())
	return nil
}
