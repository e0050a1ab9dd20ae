// Package tasktest is an in-memory task.Store for tests of the task
// service and the front: one table shared by the nodes of a test, with
// the semantics the swarm's replicated store has (reads merge the
// requests seen, a terminal record never changes, expired records are
// unknown, requests reach the running node's watchers).
package tasktest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// Table is the cluster-wide table; Node returns one node's Store on it.
type Table struct {
	mu       sync.Mutex
	recs     map[string]task.Record
	of       map[string][]string // principal → ids
	reqs     map[string][]task.Request
	watchers map[int]watcher
	next     int
	// Now is the clock reads check expiry against (time.Now when nil).
	Now func() time.Time
	// Puts counts the writes of running tasks.
	Puts int
}

type watcher struct {
	node string
	fn   func(task.Event)
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{recs: map[string]task.Record{}, of: map[string][]string{}, reqs: map[string][]task.Request{}, watchers: map[int]watcher{}}
}

// Node returns the Store of node name on t.
func (t *Table) Node(name string) task.Store { return nodeStore{t, name} }

func (t *Table) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Raw returns task id as stored, without the requests merged.
func (t *Table) Raw(id string) (task.Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.recs[id]
	return r, ok
}

type nodeStore struct {
	t    *Table
	node string
}

func (s nodeStore) Create(_ context.Context, r task.Record) error {
	s.t.mu.Lock()
	if _, ok := s.t.recs[r.ID]; ok {
		s.t.mu.Unlock()
		return fmt.Errorf("task %s exists already", r.ID)
	}
	s.t.recs[r.ID] = r
	s.t.of[r.Principal] = append(s.t.of[r.Principal], r.ID)
	s.t.mu.Unlock()
	s.t.emit(task.Event{Task: r}, "")
	return nil
}

func (s nodeStore) Put(_ context.Context, r task.Record) error {
	s.t.mu.Lock()
	old, ok := s.t.recs[r.ID]
	switch {
	case !ok:
		s.t.mu.Unlock()
		return task.ErrUnknown
	case old.Status.Terminal():
		s.t.mu.Unlock()
		return fmt.Errorf("task %s is %s already: a terminal task never changes", r.ID, old.Status)
	}
	s.t.recs[r.ID] = r
	s.t.Puts++
	merged := task.Merge(r, s.t.reqs[r.ID])
	s.t.mu.Unlock()
	s.t.emit(task.Event{Task: merged}, "")
	return nil
}

func (s nodeStore) Get(id string) (task.Record, bool) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	r, ok := s.t.recs[id]
	if !ok || r.Expired(s.t.now()) {
		return task.Record{}, false
	}
	return task.Merge(r, s.t.reqs[id]), true
}

func (s nodeStore) Of(principal string) []task.Record {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	var out []task.Record
	now := s.t.now()
	for _, id := range s.t.of[principal] {
		if r := s.t.recs[id]; !r.Expired(now) {
			out = append(out, task.Merge(r, s.t.reqs[r.ID]))
		}
	}
	slices.SortFunc(out, func(a, b task.Record) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (s nodeStore) Ask(_ context.Context, req task.Request) error {
	s.t.mu.Lock()
	r, ok := s.t.recs[req.Task]
	if !ok || r.Expired(s.t.now()) {
		s.t.mu.Unlock()
		return task.ErrUnknown
	}
	s.t.reqs[req.Task] = append(s.t.reqs[req.Task], req)
	merged := task.Merge(r, s.t.reqs[req.Task])
	s.t.mu.Unlock()
	s.t.emit(task.Event{Task: merged, Request: &req}, r.Node)
	return nil
}

func (s nodeStore) Watch(fn func(task.Event)) (cancel func()) {
	s.t.mu.Lock()
	s.t.next++
	n := s.t.next
	s.t.watchers[n] = watcher{s.node, fn}
	s.t.mu.Unlock()
	return func() {
		s.t.mu.Lock()
		delete(s.t.watchers, n)
		s.t.mu.Unlock()
	}
}

// emit calls every watcher with ev; a request goes only to runner's
// watchers, the others see the record change it makes.
func (t *Table) emit(ev task.Event, runner string) {
	t.mu.Lock()
	ws := make([]watcher, 0, len(t.watchers))
	for _, w := range t.watchers {
		ws = append(ws, w)
	}
	t.mu.Unlock()
	for _, w := range ws {
		e := ev
		if w.node != runner {
			e.Request = nil
		}
		w.fn(e)
	}
}

var _ task.Store = nodeStore{}
