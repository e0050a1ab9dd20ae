package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// overlapApp counts its updates and fails the test's check when two
// updates of one session ever run at once.
type overlapApp struct {
	inside  atomic.Int32
	overlap *atomic.Bool
}

func (a *overlapApp) Init() (Model, error) { return 0, nil }

func (a *overlapApp) Update(m Model, msg Msg) (Model, error) {
	if a.inside.Add(1) != 1 {
		a.overlap.Store(true)
	}
	runtime.Gosched() // give a second runner the chance to show itself
	a.inside.Add(-1)
	return m.(int) + 1, nil
}

func (a *overlapApp) View(Model) Node { return Button{ID: "inc", OnClick: "inc"} }

func newOverlapManager(t *testing.T, overlap *atomic.Bool, mailbox int) *Manager {
	t.Helper()
	r := NewRegistry()
	if err := r.Register("overlap", "", func() App { return &overlapApp{overlap: overlap} }); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"overlap"}, Store: NewMemoryStore(), Mailbox: mailbox, MaxPerPrincipal: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// An idle session holds no goroutine: before the queue ran on demand each
// started session parked one (with its stack) for its whole life.
func TestIdleSessionsHoldNoGoroutine(t *testing.T) {
	var overlap atomic.Bool
	m := newOverlapManager(t, &overlap, 4)
	ctx := context.Background()
	const n = 300
	before := runtime.NumGoroutine()
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		if _, err := m.Start(ctx, id, "overlap", "p"); err != nil {
			t.Fatal(err)
		}
		if res, err := m.Call(ctx, id, id+".inc.click", nil); err != nil || res.IsError {
			t.Fatal(err, res)
		}
	}
	// Parked workers (at most workersIdle) are the pool, not the sessions.
	if grown := runtime.NumGoroutine() - before; grown > workersIdle+8 {
		t.Errorf("%d idle sessions hold %d goroutines", n, grown)
	}
}

// The queue keeps what the actor goroutine guaranteed: one update at a
// time per session, in order, every acknowledged call applied, and a stop
// answering whatever still waits (ErrNotRunning) without hanging a caller.
func TestQueueRunsOneAtATimeAndStopsCleanly(t *testing.T) {
	var overlap atomic.Bool
	m := newOverlapManager(t, &overlap, 1000)
	ctx := context.Background()
	const sessions, callers, calls = 4, 8, 150
	for i := range sessions {
		if _, err := m.Start(ctx, fmt.Sprintf("s%d", i), "overlap", "p"); err != nil {
			t.Fatal(err)
		}
	}
	var acked [sessions]atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for k := range calls {
				s := (c + k) % sessions
				id := fmt.Sprintf("s%d", s)
				res, err := m.Call(ctx, id, id+".inc.click", nil)
				switch {
				case err == nil && !res.IsError:
					acked[s].Add(1)
				case s == 0 && errors.Is(err, ErrNotRunning): // s0 is stopped midway
				default:
					t.Errorf("call %d of caller %d on %s: %v %+v", k, c, id, err, res)
					return
				}
				if c == 0 && k == calls/2 {
					if _, err := m.Detach(ctx, "s0"); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if overlap.Load() {
		t.Error("two updates of one session ran at once")
	}
	for s := 1; s < sessions; s++ {
		model, err := m.Model(fmt.Sprintf("s%d", s))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint(acked[s].Load()); string(model) != want {
			t.Errorf("s%d: model %s after %s acknowledged calls", s, model, want)
		}
	}
	if _, err := m.Call(ctx, "s0", "s0.inc.click", nil); !errors.Is(err, ErrNotRunning) {
		t.Errorf("call after stop: %v", err)
	}
}

// Workers left parked exit after their linger even when the manager is
// never closed, and at once when it is.
func TestParkedWorkersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	var overlap atomic.Bool
	m := newOverlapManager(t, &overlap, 4)
	m.workers.linger = 10 * time.Millisecond
	ctx := context.Background()
	if _, err := m.Start(ctx, "s", "overlap", "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Call(ctx, "s", "s.inc.click", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return runtime.NumGoroutine() <= before })
}

// slowApp's updates take a millisecond, so callers give up mid-update.
type slowApp struct{}

func (slowApp) Init() (Model, error) { return 0, nil }

func (slowApp) Update(m Model, msg Msg) (Model, error) {
	// The update's work, not a wait: it must take as long as the callers'
	// deadlines (0 to 3 ms), so that some give up while it runs and some
	// read its answer; a gate the test opened would make every caller
	// give up or none.
	time.Sleep(time.Millisecond)
	return m.(int) + 1, nil
}

func (slowApp) View(Model) Node { return Button{ID: "inc", OnClick: "inc"} }

// Requests are pooled: one whose caller gave up is left to the session
// (which still answers into it), so no call ever reads another's answer,
// and every completed call reads its own.
func TestAbandonedRequestsAreNotReused(t *testing.T) {
	r := NewRegistry()
	if err := r.Register("slow", "", func() App { return slowApp{} }); err != nil {
		t.Fatal(err)
	}
	// A reused request would get two answers: the second blocks the
	// session, and calls time out (after 2 s here, not the default 5 s).
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"slow"}, Mailbox: 1000, CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if _, err := m.Start(context.Background(), "s", "slow", "p"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var completed, gaveUp atomic.Int32
	for c := range 4 {
		wg.Go(func() {
			for k := range 60 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((c+k)%4)*time.Millisecond)
				res, err := m.Call(ctx, "s", "s.inc.click", nil)
				cancel()
				switch {
				case err == nil && !res.IsError && res.Text == "click applied to widget `inc`":
					completed.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					gaveUp.Add(1)
				case err == nil && res.IsError && strings.Contains(res.Text, "abandoned before it ran"):
					gaveUp.Add(1) // this call's own: its deadline passed while it waited
				default:
					t.Errorf("call %d of caller %d read %v %+v", k, c, err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	if completed.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("%d completed, %d gave up: the test covers nothing", completed.Load(), gaveUp.Load())
	}
	// A call after all that reads its own answer at once.
	if res, err := m.Call(context.Background(), "s", "s.inc.click", nil); err != nil || res.IsError {
		t.Fatal(err, res)
	}
}

// A started session keeps no encoded copy of its info and tools until its
// first write, which encodes them once for the snapshots that follow.
func TestIdleSessionKeepsNoEncodedSnapshotParts(t *testing.T) {
	var overlap atomic.Bool
	m := newOverlapManager(t, &overlap, 4)
	ctx := context.Background()
	if _, err := m.Start(ctx, "s", "overlap", "p"); err != nil {
		t.Fatal(err)
	}
	a := m.actor("s") // newActor ran on this goroutine; a call's answer orders its writes before our read
	if a.parts != nil {
		t.Error("an idle session holds its encoded snapshot parts")
	}
	if _, err := m.Call(ctx, "s", "s.inc.click", nil); err != nil {
		t.Fatal(err)
	}
	if a.parts == nil {
		t.Error("a written session did not keep its snapshot parts")
	}
}
