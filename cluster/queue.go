package cluster

import (
	"sync"

	"github.com/mcpswarm/mcpswarm/internal/coalesce"
)

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
	ready coalesce.Signal // kicked: items may be non-empty
}

func newAckBox() *ackBox { return &ackBox{ready: coalesce.NewSignal()} }

func (b *ackBox) put(a ackMsg) {
	b.mu.Lock()
	b.items = append(b.items, a)
	b.mu.Unlock()
	b.ready.Kick()
}

// take returns the acknowledgements put since the last take, in order.
func (b *ackBox) take() []ackMsg {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items = nil
	return items
}

// batchQueue holds the batches queued for one peer's stream, at most
// limit (Config.PeerQueue). A channel of that capacity held its 2 KiB of
// slots on every link at rest, where pushes queue one or two batches at a
// time; this holds a small array, and a burst's larger one only until it
// drains.
type batchQueue struct {
	mu    sync.Mutex
	items []*batch
	head  int // items[head:] are queued
	limit int
	ready coalesce.Signal // kicked: a batch may be queued
}

// batchQueueKeep is the capacity a drained queue keeps for the next push.
const batchQueueKeep = 16

func newBatchQueue(limit int) *batchQueue {
	return &batchQueue{limit: limit, ready: coalesce.NewSignal()}
}

// put queues b; false when the queue is full and b was not queued.
func (q *batchQueue) put(b *batch) bool {
	q.mu.Lock()
	if len(q.items)-q.head >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, b)
	q.mu.Unlock()
	q.ready.Kick()
	return true
}

// pop returns the oldest queued batch, nil when there is none.
func (q *batchQueue) pop() *batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return nil
	}
	b := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head < len(q.items) {
		q.ready.Kick()
		return b
	}
	q.head = 0
	if cap(q.items) > batchQueueKeep {
		q.items = nil
	} else {
		q.items = q.items[:0]
	}
	return b
}

// answered removes the oldest batch in flight on a stream and returns it.
// The rest shift down and the vacated slot is cleared, where slicing past
// it would leave the array behind inflight keeping every answered batch
// (a heartbeat is the stream's own) alive at rest. A stream has a few
// batches in flight at most.
func answered(inflight []*batch) (*batch, []*batch) {
	b := inflight[0]
	n := copy(inflight, inflight[1:])
	inflight[n] = nil
	return b, inflight[:n]
}
