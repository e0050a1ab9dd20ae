package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/bench/internal/procnode"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// watcher follows one node's admin event stream (WatchEvents) and keeps,
// per session id, the times the node reported a change of it. The times
// are the node's own (timestamppb.Now() as it pushes the event), on the
// same machine's clock as the harness: what the figures measure is when
// the node saw the change, not when the harness heard of it.
type watcher struct {
	node  *procnode.Node
	admin adminv1.AdminServiceClient
	conn  *grpc.ClientConn
	stop  context.CancelFunc
	done  chan struct{}

	mu      sync.Mutex
	changed map[string][]time.Time
	err     error
	kick    chan struct{} // closed and replaced at every event
}

// watch opens n's admin connection with the cluster key and starts
// following its events.
func watch(ctx context.Context, n *procnode.Node, key []byte) (*watcher, error) {
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)}))
	if err != nil {
		return nil, fmt.Errorf("dialing %s's admin API: %w", n.Name, err)
	}
	w := &watcher{node: n, admin: adminv1.NewAdminServiceClient(conn), conn: conn, done: make(chan struct{}),
		changed: map[string][]time.Time{}, kick: make(chan struct{})}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w.stop = stop
	// The server sends nothing, not even headers, until something
	// changes: the caller learns that the stream is live from a first
	// event (see warmUp).
	stream, err := w.admin.WatchEvents(sctx, &adminv1.WatchEventsRequest{})
	if err != nil {
		stop()
		conn.Close()
		return nil, fmt.Errorf("watching %s's events: %w", n.Name, err)
	}
	go func() {
		defer close(w.done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				w.mu.Lock()
				w.err = err
				close(w.kick)
				w.kick = make(chan struct{})
				w.mu.Unlock()
				return
			}
			if ev.GetKind() != "session" {
				continue
			}
			w.mu.Lock()
			w.changed[ev.GetKey()] = append(w.changed[ev.GetKey()], ev.GetTime().AsTime())
			close(w.kick)
			w.kick = make(chan struct{})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// close ends the stream and the connection.
func (w *watcher) close() {
	w.stop()
	<-w.done
	_ = w.conn.Close()
}

// changedAfter waits until the node has reported a change of session id
// at or after since and returns the first such time.
func (w *watcher) changedAfter(ctx context.Context, id string, since time.Time) (time.Time, error) {
	for {
		w.mu.Lock()
		for _, t := range w.changed[id] {
			if !t.Before(since) {
				w.mu.Unlock()
				return t, nil
			}
		}
		kick, err := w.kick, w.err
		w.mu.Unlock()
		if err != nil {
			return time.Time{}, fmt.Errorf("%s's event stream ended: %w", w.node.Name, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s reported no change of session %s: %w", w.node.Name, id, ctx.Err())
		case <-kick:
		}
	}
}

// lastChange waits until every watcher has reported a change of every id
// at or after since, for at most d, and returns per watcher the time of
// the latest of those first changes.
func lastChange(ctx context.Context, ws []*watcher, ids []string, since time.Time, d time.Duration) ([]time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	out := make([]time.Time, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			for _, id := range ids {
				t, err := w.changedAfter(ctx, id, since)
				if err != nil {
					errs[i] = err
					return
				}
				if t.After(out[i]) {
					out[i] = t
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
