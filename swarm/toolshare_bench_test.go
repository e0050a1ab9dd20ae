package swarm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
)

// BenchmarkToolSetWait is what answering a start or a tool-set change only
// once every live peer has it costs (toolshare.go): per iteration a todo
// session is started on node A, typed into (which enables its Add button: a
// new tool) and typed into again (no new tool), then stopped, with A alone
// and with A beside a peer, in the same run. start-µs and enable-µs carry
// the wait; plain-µs, a call that changed no tool, is the baseline.
func BenchmarkToolSetWait(b *testing.B) {
	alice := authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}, Transport: authz.TransportStreamableHTTP}
	ctx := context.Background()
	run := func(b *testing.B, a testNode) {
		var start, enable, plain time.Duration
		timed := func(d *time.Duration, what string, f func() error) {
			began := time.Now()
			if err := f(); err != nil {
				b.Fatalf("%s: %v", what, err)
			}
			*d += time.Since(began)
		}
		call := func(id, text string) func() error {
			return func() error {
				res, err := a.sw.Call(ctx, alice, id, id+".new.type_into", map[string]any{"text": text})
				if err == nil && res.IsError {
					err = fmt.Errorf("%s", res.Text)
				}
				return err
			}
		}
		b.ResetTimer()
		for i := range b.N {
			id := fmt.Sprintf("w%d", i)
			timed(&start, "start", func() error { _, err := a.sw.Start(ctx, alice, "todo", id); return err })
			timed(&enable, "first type_into", call(id, "milk"))
			timed(&plain, "second type_into", call(id, "milk and eggs"))
			if err := a.sw.Stop(ctx, alice, id); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for name, d := range map[string]time.Duration{"start-µs": start, "enable-µs": enable, "plain-µs": plain} {
			b.ReportMetric(float64(d.Microseconds())/float64(b.N), name)
		}
	}
	b.Run("alone", func(b *testing.B) { run(b, startTestNode(b, "solo", false)) })
	b.Run("one-peer", func(b *testing.B) {
		a := startTestNode(b, "a", false)
		p := startTestNode(b, "p", false, a.cl.Self().GossipAddr)
		awaitPeers(b, a, p)
		run(b, a)
	})
}
