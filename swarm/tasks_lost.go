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
//     winner) first stops running the task if it still was and gives its
//     copy the settlement, then removes it; a node that hears of the
//     removal before the winning copy reached it keeps the removed one
//     (retired), so no read goes back from a finished status;
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

// adopter reports whether this node is the one to adopt lost runners'
// tasks — the first live member by name — and whether it may now: only
// while it is in sync (cluster.InSync: it hears a majority and has pulled
// everything from those it hears since it lost the others). So a node cut
// off alone does not settle the tasks of nodes it merely cannot hear, and
// the adopter holds the last record the lost runner wrote if any live
// peer does: an adoption made without it would read as failed until a
// peer relayed a completion the runner wrote before it died.
func (t *taskStore) adopter() (first, may bool) {
	for _, m := range t.s.cl.Members() {
		if m.State == cluster.StateAlive || m.State == cluster.StateDraining {
			if !m.Self {
				return false, false
			}
			return true, t.s.cl.InSync() == nil
		}
	}
	return false, false
}

// adoptRetry is how soon the first member, kept from adopting by not
// being in sync, looks again: getting there raises no event.
const adoptRetry = time.Second

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
	first, may := t.adopter()

	var (
		writes  []task.Record
		removes []string
		stops   []task.Event
		gone    []task.Event
		next    time.Time
	)
	soon := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	t.mu.Lock()
	for id, e := range t.tasks {
		win := e.winner(now)
		mine := e.copies[t.self]
		if mine != nil && (mine.origin != own || mine.retired) {
			mine = nil
		}
		if win == nil {
			// Expired, or only requests left: the holder removes its
			// entries, every node forgets them.
			if mine != nil {
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
		soon(win.rec.Created.Add(win.rec.TTL))
		// Adopt what a departed origin's copy makes every node read, unless
		// this node holds it already. That includes a record of the lost
		// runner's that arrives after an adoption, relayed by a peer that
		// heard it last, and settled before it: it is what that peer has
		// been reading all along, and the adopted copy follows it.
		if first && win.lost && !win.retired && t.departed(win.origin) {
			view, _ := e.view(now)
			if mine == nil || mine.rec.Status != view.Status || !mine.rec.Updated.Equal(view.Updated) {
				if may {
					writes = append(writes, settleLost(view, now))
				} else {
					soon(now.Add(adoptRetry))
				}
			}
		}
		if mine != nil && win != mine {
			switch {
			case !mine.rec.Status.Terminal() && win.rec.Status.Terminal():
				// Settled elsewhere while this node was taken for lost: its
				// run stops, and its copy takes the settlement (removing
				// it could leave a node that lacks the settlement with
				// nothing to read).
				if mine.rec.Node == t.self && !mine.stopped {
					mine.stopped = true
					stops = append(stops, task.Event{Task: mine.rec, Request: &task.Request{Task: id, Cancel: true}})
				}
				writes = append(writes, win.rec)
			case mine.rec.Status.Terminal() && e.heldBetter(mine, now):
				// Two finished copies: the one nobody reads goes, once a
				// live node holds one that beats it (each node keeps it
				// retired until that one reaches it).
				removes = append(removes, taskKeyPrefix+id)
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

// heldBetter reports whether a live origin's unexpired copy of e's task
// beats c.
func (e *taskEntry) heldBetter(c *taskCopy, now time.Time) bool {
	for _, d := range e.copies {
		if d != c && !d.lost && !d.rec.Expired(now) && d.beats(c) {
			return true
		}
	}
	return false
}
