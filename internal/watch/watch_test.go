package watch

import (
	"slices"
	"sync"
	"testing"
)

func TestNotifyCallsEveryCallbackInRegistrationOrder(t *testing.T) {
	var s Set[int]
	var got []string
	s.Add(func(v int) { got = append(got, "a"+string(rune('0'+v))) })
	s.Add(func(v int) { got = append(got, "b"+string(rune('0'+v))) })
	s.Notify(1, 2)
	if want := []string{"a1", "b1", "a2", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestCancelRemovesOnlyItsOwnCallbackAndIsIdempotent(t *testing.T) {
	var s Set[string]
	var a, b int
	cancelA := s.Add(func(string) { a++ })
	s.Add(func(string) { b++ })
	cancelA()
	cancelA()
	s.Notify("x")
	if a != 0 || b != 1 || s.Len() != 1 {
		t.Fatalf("a=%d b=%d len=%d, want 0 1 1", a, b, s.Len())
	}
}

func TestACallbackMayCancelItselfDuringNotify(t *testing.T) {
	var s Set[int]
	var cancel func()
	calls := 0
	cancel = s.Add(func(int) { calls++; cancel() })
	other := 0
	s.Add(func(int) { other++ })
	s.Notify(1)
	s.Notify(2)
	if calls != 1 || other != 2 {
		t.Fatalf("self-cancelling callback ran %d times, other %d; want 1 and 2", calls, other)
	}
}

func TestNotifyWithNobodyListeningDoesNothing(t *testing.T) {
	var s Set[int]
	s.Notify(1)
	if s.Len() != 0 {
		t.Fatal("empty set has callbacks")
	}
}

func TestConcurrentAddCancelNotify(t *testing.T) {
	var s Set[int]
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				c := s.Add(func(int) {})
				s.Notify(i)
				c()
			}
		}()
	}
	wg.Wait()
	if s.Len() != 0 {
		t.Fatalf("%d callbacks left after every one was cancelled", s.Len())
	}
}
