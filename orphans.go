package mcpswarm

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcpswarm/mcpswarm/swarm"
)

// orphanSweepEvery is how often a node stops the sessions of ended
// unauthenticated connections: the most such a session outlives its
// connection, plus the revocation's replication (about a second).
const orphanSweepEvery = 5 * time.Second

// orphanSweep runs swarm.StopOrphans on a ticker until stopped.
type orphanSweep struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startOrphanSweep(sw *swarm.Swarm, every time.Duration, log *slog.Logger) *orphanSweep {
	ctx, cancel := context.WithCancel(context.Background())
	o := &orphanSweep{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := sw.StopOrphans(ctx); err != nil && ctx.Err() == nil {
					log.Warn("stopping sessions of ended connections", "err", err)
				}
			}
		}
	}()
	return o
}

// stop ends the sweep and waits for it; safe on nil.
func (o *orphanSweep) stop() {
	if o == nil {
		return
	}
	o.cancel()
	<-o.done
}
