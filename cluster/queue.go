package cluster

import "sync"

// serialQueue delivers items to callbacks in the order they were added,
// outside the caller's locks, from one goroutine at a time. add may be
// called under the lock that orders the items; drain must be called without
// it. A callback that adds items (directly or by writing) does not deadlock:
// its items are delivered by the drain already running.
type serialQueue[T any] struct {
	mu    sync.Mutex
	items []T
	busy  bool
}

func (q *serialQueue[T]) add(item T) {
	q.mu.Lock()
	q.items = append(q.items, item)
	q.mu.Unlock()
}

// drain delivers queued items with fn unless another goroutine is already
// delivering; that goroutine then delivers them.
func (q *serialQueue[T]) drain(fn func(T)) {
	q.mu.Lock()
	if q.busy {
		q.mu.Unlock()
		return
	}
	q.busy = true
	for len(q.items) > 0 {
		batch := q.items
		q.items = nil
		q.mu.Unlock()
		for _, it := range batch {
			fn(it)
		}
		q.mu.Lock()
	}
	q.busy = false
	q.mu.Unlock()
}
