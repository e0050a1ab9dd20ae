package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/coalesce"
	"github.com/mcpswarm/mcpswarm/internal/watch"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// The task table (registry "tasks") holds two kinds of entries:
//
//   - "t/<id>": a task's record, in the partition of the node that runs it
//     (or of the survivor that adopted it once its runner was lost);
//   - "r/<id>/<n>": a request for a task (cancel, input responses), in the
//     partition of the node that took it from the client.
//
// Every node keeps an index of both, fed by the registry's change
// callbacks, and answers reads from it. A read merges the requests into
// the record (task.Merge), so a tasks/get anywhere right after an
// acknowledged tasks/cancel or tasks/update already shows its effect.
const (
	taskKeyPrefix = "t/"
	reqKeyPrefix  = "r/"
)

// taskStore is the swarm's task.Store.
type taskStore struct {
	s    *Swarm
	reg  *cluster.Registry
	lim  task.Limits
	self string

	mu    sync.Mutex
	tasks map[string]*taskEntry
	// byPrincipal lists each principal's task ids, for Of and the limit.
	byPrincipal map[string]map[string]struct{}
	// started is set once the node's own entries were restored: from then
	// on this node's own records are written through (put), and the
	// registry's echo of them is ignored so it cannot roll a newer
	// write-through back.
	started bool
	// restored are the ids of this node's own unfinished tasks read back
	// from disk at start: their runs died with the previous process, so
	// start settles them.
	restored []string
	// nextExpiry is when the maintenance loop next has a record to expire.
	nextExpiry time.Time

	watchers watch.Set[task.Event]
	kick     coalesce.Signal
	// reqSeq numbers this node's requests. Seeded from the clock, so a
	// restarted node's keys never meet the ones it restored.
	reqSeq atomic.Uint64
}

// taskEntry is everything this node knows of one task id.
type taskEntry struct {
	principal string
	// copies are the records of the id, by the name of the origin that
	// holds them: normally one (the runner's); two while an adopted copy
	// and the runner's coexist (the loser is removed by its holder).
	copies map[string]*taskCopy
	// reqs are the requests for the task, by origin name and key.
	reqs map[string]taskReq
}

// taskCopy is one origin's record of a task.
type taskCopy struct {
	origin crdt.Origin
	rec    task.Record
	// lost marks a copy whose origin is hidden or gone (dead, departed,
	// replaced by a restart): no longer visible in the registry, kept here
	// so a survivor can adopt it and reads keep answering meanwhile.
	lost bool
	// retired marks a finished copy its holder removed because another
	// copy of the task wins: kept (lost) until it expires, never adopted.
	retired bool
	// stopped is set on this node's copy of a task it runs once its run
	// was told to stop, because another copy settled the task.
	stopped bool
}

// taskReq is one request entry.
type taskReq struct {
	origin crdt.Origin
	key    string
	req    task.Request
}

func newTaskStore(s *Swarm, reg *cluster.Registry, lim task.Limits) *taskStore {
	t := &taskStore{
		s: s, reg: reg, lim: lim.WithDefaults(), self: s.self,
		tasks:       map[string]*taskEntry{},
		byPrincipal: map[string]map[string]struct{}{},
		kick:        coalesce.NewSignal(),
	}
	t.reqSeq.Store(uint64(time.Now().UnixNano()))
	reg.OnChange(t.onChange)
	reg.OnHiddenChange(t.onChange)
	return t
}

// Tasks is the cluster-wide task table the MCP front keeps its tasks in.
func (s *Swarm) Tasks() task.Store { return s.tasks }

var _ task.Store = (*taskStore)(nil)

// Create implements task.Store.
func (t *taskStore) Create(ctx context.Context, r task.Record) error {
	if r.ID == "" || strings.Contains(r.ID, "/") {
		return fmt.Errorf("creating task %q: an id is required and holds no '/'", r.ID)
	}
	if r.Node == "" {
		r.Node = t.self
	}
	now := t.s.cl.Clock().Now()
	if r.Created.IsZero() {
		r.Created = now
	}
	if r.Updated.IsZero() {
		r.Updated = r.Created
	}
	if r.TTL <= 0 {
		// A record without a TTL would be kept forever.
		r.TTL = t.lim.DefaultTTL
	}
	t.mu.Lock()
	if e := t.tasks[r.ID]; e != nil && len(e.copies) > 0 {
		t.mu.Unlock()
		return fmt.Errorf("creating task %s: the id is taken", r.ID)
	}
	held := t.countLocked(r.Principal, now)
	t.mu.Unlock()
	if held >= t.lim.PerPrincipal {
		return fmt.Errorf("%w: %d tasks are held already, at most %d per principal (--task-per-principal)", task.ErrTooMany, held, t.lim.PerPrincipal)
	}
	if err := t.put(r); err != nil {
		return err
	}
	if err := t.await(ctx, "create", r.ID); err != nil {
		// The caller gave up, so no client holds the handle: the record
		// goes rather than stay working with nobody running it.
		t.remove(taskKeyPrefix + r.ID)
		return err
	}
	return nil
}

// Put implements task.Store. A task whose stored status is terminal keeps
// it: putting the same status again does nothing, another is refused. A
// task a client asked to cancel ends Cancelled whatever the runner
// reports, because every node has read it as Cancelled since the request.
func (t *taskStore) Put(ctx context.Context, r task.Record) error {
	now := t.s.cl.Clock().Now()
	t.mu.Lock()
	e := t.tasks[r.ID]
	var win *taskCopy
	if e != nil {
		win = e.winner(now)
	}
	if win == nil {
		t.mu.Unlock()
		return fmt.Errorf("putting task %s: %w", r.ID, task.ErrUnknown)
	}
	cur := win.rec
	cancelled := e.cancelRequested()
	t.mu.Unlock()
	if cur.Status.Terminal() {
		if cur.Status == r.Status {
			return nil
		}
		return fmt.Errorf("putting task %s as %s: it is already %s, and a terminal status never changes", r.ID, r.Status, cur.Status)
	}
	if cancelled && r.Status.Terminal() && r.Status != task.Cancelled {
		r.Status, r.Result, r.Error, r.InputRequests = task.Cancelled, nil, nil, nil
	}
	if r.Updated.IsZero() || r.Updated.Before(cur.Updated) {
		r.Updated = now
	}
	if err := t.put(r); err != nil {
		return err
	}
	return t.await(ctx, "put", r.ID)
}

// Get implements task.Store.
func (t *taskStore) Get(id string) (task.Record, bool) {
	now := t.s.cl.Clock().Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.tasks[id]
	if e == nil {
		return task.Record{}, false
	}
	return e.view(now)
}

// Of implements task.Store.
func (t *taskStore) Of(principal string) []task.Record {
	now := t.s.cl.Clock().Now()
	t.mu.Lock()
	out := make([]task.Record, 0, len(t.byPrincipal[principal]))
	for id := range t.byPrincipal[principal] {
		if rec, ok := t.tasks[id].view(now); ok {
			out = append(out, rec)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b task.Record) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// len is how many task ids this node knows.
func (t *taskStore) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.tasks)
}

// countLocked is how many unexpired tasks principal holds.
func (t *taskStore) countLocked(principal string, now time.Time) int {
	n := 0
	for id := range t.byPrincipal[principal] {
		if t.tasks[id].winner(now) != nil {
			n++
		}
	}
	return n
}

// Ask implements task.Store: the request goes into this node's partition,
// which the runner reads like every other node. A request for a finished
// task changes nothing and is not written.
func (t *taskStore) Ask(ctx context.Context, req task.Request) error {
	rec, ok := t.Get(req.Task)
	if !ok {
		return fmt.Errorf("asking task %s: %w", req.Task, task.ErrUnknown)
	}
	if rec.Status.Terminal() {
		return nil
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding the request for task %s: %w", req.Task, err)
	}
	key := reqKeyPrefix + req.Task + "/" + strconv.FormatUint(t.reqSeq.Add(1), 36)
	if err := t.reg.Put(key, b); err != nil {
		return fmt.Errorf("asking task %s: %w", req.Task, err)
	}
	t.changed(t.s.cl.Origin(), key, b, false, false)
	return t.await(ctx, "ask", req.Task)
}

// Watch implements task.Store.
func (t *taskStore) Watch(fn func(task.Event)) (cancel func()) { return t.watchers.Add(fn) }

// put writes r as this node's record of its task and into the index at
// once, so this node reads its own write before the registry's echo.
func (t *taskStore) put(r task.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding task %s: %w", r.ID, err)
	}
	key := taskKeyPrefix + r.ID
	if err := t.reg.Put(key, b); err != nil {
		return fmt.Errorf("storing task %s: %w", r.ID, err)
	}
	t.changed(t.s.cl.Origin(), key, b, false, false)
	return nil
}

// remove deletes this node's entry under key, from the registry and the
// index.
func (t *taskStore) remove(key string) {
	if err := t.reg.Remove(key); err != nil {
		t.s.log.Warn("removing a task entry", "key", key, "err", err)
		return
	}
	t.changed(t.s.cl.Origin(), key, nil, false, false)
}

// await waits, at most AckTimeout, until every live peer applied this
// node's writes. A peer that misses it has lost its lease on this node
// when AwaitPeers returns, so it refuses to serve until it has caught up:
// no node answers without the write either way. Only the caller's own
// end is an error.
func (t *taskStore) await(ctx context.Context, what, id string) error {
	clock := t.s.cl.Clock()
	actx, cancel := clockwork.WithTimeout(ctx, clock, t.s.ackTimeout)
	defer cancel()
	start := clock.Now()
	err := t.reg.AwaitPeers(actx)
	t.s.met.taskAck(clock.Since(start), err == nil)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("task %s: waiting for every live peer to hold the %s: %w", id, what, err)
	}
	t.s.log.Warn("task change not applied by every live peer in time", "what", what, "task", id, "err", err)
	return nil
}

// onChange takes in a registry change (visible, or relayed for a hidden
// origin).
func (t *taskStore) onChange(ch crdt.Change) {
	own := t.s.cl.Origin()
	if ch.Origin.Name == t.self {
		if ch.Origin != own || ch.Hidden {
			return // an earlier run's entries: this run restored its own
		}
		t.mu.Lock()
		started := t.started
		t.mu.Unlock()
		if started {
			return // written through by put, Ask and remove
		}
	}
	gone := false
	if ch.New == nil && !ch.Hidden && ch.Origin != own {
		gone = t.gone(ch.Origin)
	}
	t.changed(ch.Origin, ch.Key, ch.New, ch.Hidden, gone)
}

// gone reports whether origin o is hidden here, or its partition was
// replaced (its node restarted: the new epoch's arrived, and the old one's
// entries leave with it) or dropped, or it is no longer the live
// incarnation of its node: its entries then leave the registry without
// their writer having removed them. A restarted node's records come back
// under its new epoch a moment later; meanwhile they must not vanish.
func (t *taskStore) gone(o crdt.Origin) bool {
	if t.reg.Hidden(o) {
		return true
	}
	held := false
	for _, v := range t.reg.Digest() {
		if v.Origin == o {
			held = true
			break
		}
	}
	if !held {
		return true
	}
	m, ok := t.s.cl.Member(o.Name)
	return !ok || m.Origin != o || m.State == cluster.StateDead || m.State == cluster.StateLeft
}

// changed applies one entry change to the index and tells the watchers.
// value nil is a removal: gone says its origin vanished (the copy is kept,
// lost), hidden that a peer relayed the removal its dead writer made.
func (t *taskStore) changed(o crdt.Origin, key string, value []byte, hidden, gone bool) {
	id, reqKey, ok := parseTaskKey(key)
	if !ok {
		return
	}
	var rec task.Record
	var req task.Request
	if value != nil {
		var err error
		if reqKey == "" {
			err = json.Unmarshal(value, &rec)
		} else {
			err = json.Unmarshal(value, &req)
		}
		if err != nil {
			t.s.log.Warn("ignoring a malformed task entry", "key", key, "origin", o.String(), "err", err)
			return
		}
	}
	now := t.s.cl.Clock().Now()
	t.mu.Lock()
	e := t.tasks[id]
	if e == nil {
		if value == nil {
			t.mu.Unlock()
			return
		}
		e = &taskEntry{copies: map[string]*taskCopy{}, reqs: map[string]taskReq{}}
		t.tasks[id] = e
	}
	kick := false
	if reqKey == "" {
		c := e.copies[o.Name]
		switch {
		case c != nil && c.origin.Epoch > o.Epoch:
			// An earlier incarnation's entry, relayed late.
		case value != nil:
			e.copies[o.Name] = &taskCopy{origin: o, rec: rec, lost: hidden}
			if e.principal == "" {
				e.principal = rec.Principal
				t.index(rec.Principal, id)
			}
			// The upkeep has work when a copy is lost or doubled, when
			// this node's requests of a task that ended can go, or when
			// the record expires before the next one it waits for.
			kick = hidden || len(e.copies) > 1 || (rec.Status.Terminal() && e.asked(t.s.cl.Origin())) ||
				t.nextExpiry.IsZero() || rec.Created.Add(rec.TTL).Before(t.nextExpiry)
		case c == nil:
		case gone:
			c.lost, kick = true, true
		case c.rec.Status.Terminal() && !c.rec.Expired(now):
			// Its holder removed it because another copy wins; that copy
			// may not have reached this node yet, and until it has, this
			// one is what every other node reads.
			c.lost, c.retired, kick = true, true, true
		default:
			delete(e.copies, o.Name)
			kick = true
		}
		if !t.started && o == t.s.cl.Origin() && value != nil && rec.Node == t.self && !rec.Status.Terminal() {
			t.restored = append(t.restored, id)
		}
	} else {
		k := o.Name + "/" + reqKey
		switch {
		case value != nil:
			e.reqs[k] = taskReq{origin: o, key: key, req: req}
		case gone || hidden:
			// Acknowledged to a client before its writer vanished: it
			// still counts.
		default:
			delete(e.reqs, k)
		}
	}
	var evs []task.Event
	view, known := e.view(now)
	switch {
	case known:
		evs = append(evs, task.Event{Task: view})
	case reqKey == "" && value == nil:
		evs = append(evs, task.Event{Task: task.Record{ID: id, Principal: e.principal}, Gone: true})
	}
	if reqKey != "" && value != nil {
		// The runner hears the request itself, also one whose writer was
		// lost meanwhile: every node reads it merged in already.
		if c := e.copies[t.self]; c != nil && c.origin == t.s.cl.Origin() && c.rec.Node == t.self && !c.rec.Status.Terminal() {
			r := req
			evs = append(evs, task.Event{Task: c.rec, Request: &r})
		}
	}
	if len(e.copies) == 0 && len(e.reqs) == 0 {
		t.forgetLocked(id)
	}
	t.mu.Unlock()
	if kick {
		t.kick.Kick()
	}
	t.watchers.Notify(evs...)
}

// asked reports whether origin o wrote a request for e's task.
func (e *taskEntry) asked(o crdt.Origin) bool {
	for _, r := range e.reqs {
		if r.origin == o {
			return true
		}
	}
	return false
}

// index lists id under principal.
func (t *taskStore) index(principal, id string) {
	ids := t.byPrincipal[principal]
	if ids == nil {
		ids = map[string]struct{}{}
		t.byPrincipal[principal] = ids
	}
	ids[id] = struct{}{}
}

// forgetLocked drops id from the index.
func (t *taskStore) forgetLocked(id string) {
	e := t.tasks[id]
	if e == nil {
		return
	}
	delete(t.tasks, id)
	if ids := t.byPrincipal[e.principal]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(t.byPrincipal, e.principal)
		}
	}
}

// parseTaskKey splits a registry key into the task id and, for a request,
// the request's key.
func parseTaskKey(key string) (id, reqKey string, ok bool) {
	if rest, found := strings.CutPrefix(key, taskKeyPrefix); found && rest != "" {
		return rest, "", true
	}
	if rest, found := strings.CutPrefix(key, reqKeyPrefix); found {
		if id, n, found := strings.Cut(rest, "/"); found && id != "" && n != "" {
			return id, key, true
		}
	}
	return "", "", false
}
