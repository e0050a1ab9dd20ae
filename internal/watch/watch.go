// Package watch keeps the callbacks that asked to hear about changes: the
// one registry behind the node's Watch and Subscribe methods (the session
// manager's events, the swarm's backend events, membership changes, the UI's
// action journal).
package watch

import (
	"sync"
	"sync/atomic"
)

// Set is a set of callbacks of one event type. Its zero value is ready to
// use; it must not be copied after first use.
//
// Callbacks run on the notifier's goroutine, outside the set's lock, so a
// callback may add or cancel callbacks (its own included); one cancelled
// while a notification is under way may still hear that notification.
type Set[T any] struct {
	mu      sync.Mutex
	next    uint64
	entries []entry[T] // in registration order
	n       atomic.Int32
}

type entry[T any] struct {
	id uint64
	fn func(T)
}

// Add registers fn and returns the function that removes it; calling that
// more than once is harmless.
func (s *Set[T]) Add(fn func(T)) (cancel func()) {
	s.mu.Lock()
	s.next++
	id := s.next
	s.entries = append(s.entries, entry[T]{id: id, fn: fn})
	s.n.Store(int32(len(s.entries)))
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, e := range s.entries {
			if e.id == id {
				// A fresh slice, so a snapshot being notified is not disturbed.
				s.entries = append(s.entries[:i:i], s.entries[i+1:]...)
				s.n.Store(int32(len(s.entries)))
				return
			}
		}
	}
}

// Len is the number of registered callbacks; it takes no lock, so a hot
// path can skip building events nobody hears.
func (s *Set[T]) Len() int { return int(s.n.Load()) }

// Notify calls every registered callback with each of vs, in order: every
// callback hears the first value before any hears the second, and
// callbacks are called in the order they were added.
func (s *Set[T]) Notify(vs ...T) {
	if len(vs) == 0 || s.Len() == 0 {
		return
	}
	s.mu.Lock()
	entries := s.entries
	s.mu.Unlock()
	for _, v := range vs {
		for _, e := range entries {
			e.fn(v)
		}
	}
}
