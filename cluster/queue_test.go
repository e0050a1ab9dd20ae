package cluster

import "testing"

// TestBatchQueueKeepsOrderAndBound: a peer's queue hands batches out in
// the order they were queued, refuses one beyond its bound, and takes
// more once the stream has popped some.
func TestBatchQueueKeepsOrderAndBound(t *testing.T) {
	q := newBatchQueue(3)
	bs := []*batch{{count: 1}, {count: 2}, {count: 3}, {count: 4}}
	for _, b := range bs[:3] {
		if !q.put(b) {
			t.Fatalf("batch %d refused below the bound", b.count)
		}
	}
	if q.put(bs[3]) {
		t.Fatal("a fourth batch was queued beyond a bound of 3")
	}
	if got := q.pop(); got != bs[0] {
		t.Fatalf("popped %v, want the first batch", got)
	}
	if !q.put(bs[3]) {
		t.Fatal("a batch was refused after one was popped")
	}
	for _, want := range bs[1:] {
		select {
		case <-q.ready:
		default:
			t.Fatalf("nothing signalled with batch %d queued", want.count)
		}
		if got := q.pop(); got != want {
			t.Fatalf("popped %v, want batch %d", got, want.count)
		}
	}
	if got := q.pop(); got != nil {
		t.Fatalf("popped %v from an empty queue", got)
	}
}

// TestBatchQueueLetsDrainedBatchesGo: once drained, a queue references
// none of the batches it held, and a burst's large array is not kept.
func TestBatchQueueLetsDrainedBatchesGo(t *testing.T) {
	q := newBatchQueue(1000)
	for range 2 * batchQueueKeep {
		q.put(&batch{})
	}
	for q.pop() != nil {
	}
	if cap(q.items) > batchQueueKeep {
		t.Errorf("a drained queue keeps an array of %d slots", cap(q.items))
	}
	q.put(&batch{})
	q.pop()
	for i, b := range q.items[:cap(q.items)] {
		if b != nil {
			t.Errorf("slot %d of a drained queue still references a batch", i)
		}
	}
}

// TestAnsweredReleasesTheBatch: taking the oldest batch in flight keeps
// the others in order and leaves no slot of the array referencing the
// answered one.
func TestAnsweredReleasesTheBatch(t *testing.T) {
	a, b := &batch{count: 1}, &batch{count: 2}
	array := make([]*batch, 4)
	inflight := append(array[:0], a, b)
	got, inflight := answered(inflight)
	if got != a || len(inflight) != 1 || inflight[0] != b {
		t.Fatalf("answered returned %v and %v, want the first batch and the second left", got, inflight)
	}
	got, inflight = answered(inflight)
	if got != b || len(inflight) != 0 {
		t.Fatalf("answered returned %v and %d left, want the second batch and none", got, len(inflight))
	}
	for i, s := range array {
		if s != nil {
			t.Errorf("slot %d still references batch %d", i, s.count)
		}
	}
}
