package cluster

import "sync"

// serialQueue delivers items to callbacks in the order they were added,
// outside the caller's locks, from one goroutine at a time. add may be
// called under the lock that orders the items; drain must be called without
// it. A callback that adds items (directly or by writing) does not deadlock:
// its items are delivered by the drain already running.
type serialQueue[T any] struct {
	mu        sync.Mutex
	items     []T
	busy      bool
	added     uint64     // items ever added
	delivered uint64     // items ever delivered
	done      *sync.Cond // broadcast as items are delivered; on mu
}

func (q *serialQueue[T]) add(item T) {
	q.mu.Lock()
	q.items = append(q.items, item)
	q.added++
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
		q.delivered += uint64(len(batch))
		q.cond().Broadcast()
	}
	q.busy = false
	q.mu.Unlock()
}

// settle delivers what was added before the call (drain) and, when
// another goroutine is delivering, waits until it has. It must not be
// called from a callback: that would wait for itself.
func (q *serialQueue[T]) settle(fn func(T)) {
	q.drain(fn)
	q.mu.Lock()
	defer q.mu.Unlock()
	target := q.added
	for q.delivered < target && q.busy {
		q.cond().Wait()
	}
}

// cond is done, made on first use; the caller holds mu.
func (q *serialQueue[T]) cond() *sync.Cond {
	if q.done == nil {
		q.done = sync.NewCond(&q.mu)
	}
	return q.done
}

// ackBox hands a stream's acknowledgements from its reader to its loop.
// The reader never blocks on it (the loop may be blocked sending, and the
// peer answers only what it reads), and it holds only the acknowledgements
// not yet taken: a channel that could never block held PeerQueue+4 slots,
// 6 KiB on every stream to every peer at rest.
type ackBox struct {
	mu    sync.Mutex
	items []ackMsg
	ready chan struct{} // cap 1: items is non-empty
}

func newAckBox() *ackBox { return &ackBox{ready: make(chan struct{}, 1)} }

func (b *ackBox) put(a ackMsg) {
	b.mu.Lock()
	b.items = append(b.items, a)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// take returns the acknowledgements put since the last take, in order.
func (b *ackBox) take() []ackMsg {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items = nil
	return items
}
