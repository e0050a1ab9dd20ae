package swarm

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// The task table's upkeep, one loop per node (maintain), woken by changes
// that need it, by membership changes and by the next expiry:
//
//   - a runner lost (dead, departed, or restarted under a new epoch before
//     it settled its tasks): the first live member by name adopts its
//     records into its own partition, terminal ones as they are, the
//     others settled Failed naming the lost node; if that member dies
//     first, the next one is first and does it;
//   - a restarted node settles its own unfinished tasks the same way (their
//     runs died with the previous process);
//   - of two copies of one task, the holder of the one nobody reads (see
//     winner) removes it, and stops running the task if it still was;
//   - expired records are removed by their holder and forgotten by all;
//     requests are removed by their writer once their task is finished or
//     gone.

// lostError is the error of a task whose runner was lost before it ended.
func lostError(node string) *task.Error {
	return &task.Error{Code: -32603, Message: fmt.Sprintf("the node running this task (%s) was lost", node)}
}

// settleLost returns rec settled Failed because its runner was lost, or
// rec itself when it already ended.
func settleLost(rec task.Record, now time.Time) task.Record {
	if rec.Status.Terminal() {
		return rec
	}
	rec.Error = lostError(rec.Node)
	rec.Status, rec.Message, rec.Result, rec.InputRequests = task.Failed, rec.Error.Message, nil, nil
	rec.Updated = now
	return rec
}

// start begins the upkeep once this node's own entries are restored.
func (t *taskStore) start(ctx context.Context, done chan struct{}) {
	now := t.s.cl.Clock().Now()
	own := t.s.cl.Origin()
	var settle []task.Record
	t.mu.Lock()
	t.started = true
	for _, id := range t.restored {
		if e := t.tasks[id]; e != nil {
			if c := e.copies[t.self]; c != nil && c.origin == own && !c.rec.Status.Terminal() {
				settle = append(settle, settleLost(c.rec, now))
			}
		}
	}
	t.restored = nil
	t.mu.Unlock()
	// Before the node serves, so it never answers for a run it lost.
	for _, rec := range settle {
		if err := t.put(rec); err != nil {
			t.s.log.Warn("settling a task this node ran before it restarted", "task", rec.ID, "err", err)
		}
	}
	go t.maintain(ctx, done)
}

// maintain runs upkeep rounds until ctx ends.
func (t *taskStore) maintain(ctx context.Context, done chan struct{}) {
	defer close(done)
	clock := t.s.cl.Clock()
	for {
		next := t.round(ctx)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(clock.Now()), time.Millisecond)
		}
		timer := clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-t.kick:
		case <-timer.Chan():
		}
		timer.Stop()
	}
}

// adopter reports whether this node adopts lost runners' tasks: the first
// live member by name.
func (t *taskStore) adopter() bool {
	for _, m := range t.s.cl.Members() {
		if m.State == cluster.StateAlive || m.State == cluster.StateDraining {
			return m.Self
		}
	}
	return false
}

// departed reports whether origin o is lost for good: dead, left, or
// replaced by a later run. A merely suspect origin may come back, and its
// tasks with it.
func (t *taskStore) departed(o crdt.Origin) bool {
	m, ok := t.s.cl.Member(o.Name)
	return !ok || m.Origin != o || m.State == cluster.StateDead || m.State == cluster.StateLeft
}

// round does one pass of upkeep and returns when the next record expires
// (zero: none).
func (t *taskStore) round(ctx context.Context) time.Time {
	now := t.s.cl.Clock().Now()
	own := t.s.cl.Origin()
	adopter := t.adopter()

	var (
		writes  []task.Record
		removes []string
		stops   []task.Event
		gone    []task.Event
		next    time.Time
	)
	t.mu.Lock()
	for id, e := range t.tasks {
		win := e.winner(now)
		if win == nil {
			// Expired, or only requests left: the holder removes its
			// entries, every node forgets them.
			if mine := e.copies[t.self]; mine != nil && mine.origin == own {
				removes = append(removes, taskKeyPrefix+id)
			}
			for _, r := range e.reqs {
				if r.origin == own {
					removes = append(removes, r.key)
				}
			}
			if len(e.copies) > 0 {
				gone = append(gone, task.Event{Task: task.Record{ID: id, Principal: e.principal}, Gone: true})
			}
			t.forgetLocked(id)
			continue
		}
		if exp := win.rec.Created.Add(win.rec.TTL); next.IsZero() || exp.Before(next) {
			next = exp
		}
		if adopter && win.lost && t.departed(win.origin) && !e.adoptedBy(own) {
			rec, _ := e.view(now)
			writes = append(writes, settleLost(rec, now))
		}
		if mine := e.copies[t.self]; mine != nil && mine.origin == own && win != mine && !win.lost {
			removes = append(removes, taskKeyPrefix+id)
			if mine.rec.Node == t.self && !mine.rec.Status.Terminal() {
				// Settled elsewhere while this node was taken for lost:
				// its run stops.
				stops = append(stops, task.Event{Task: mine.rec, Request: &task.Request{Task: id, Cancel: true}})
			}
		}
		if win.rec.Status.Terminal() {
			for _, r := range e.reqs {
				if r.origin == own {
					removes = append(removes, r.key)
				}
			}
		}
	}
	t.nextExpiry = next
	t.mu.Unlock()

	t.watchers.Notify(gone...)
	t.watchers.Notify(stops...)
	for _, rec := range writes {
		if err := t.put(rec); err != nil {
			t.s.log.Warn("settling a task whose runner was lost", "task", rec.ID, "node", rec.Node, "err", err)
		}
	}
	for _, key := range removes {
		t.remove(key)
	}
	if len(writes) > 0 {
		if err := t.await(ctx, "settlement", writes[0].ID); err != nil {
			t.s.log.Warn("settled tasks not held by every live peer", "err", err)
		}
	}
	return next
}

// adoptedBy reports whether origin o holds a copy of e's task already.
func (e *taskEntry) adoptedBy(o crdt.Origin) bool {
	c := e.copies[o.Name]
	return c != nil && c.origin == o
}
