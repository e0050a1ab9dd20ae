package session

import (
	"context"
	"runtime"
	"strings"
	"testing"
)

// stackApp records, at each update, whether it ran on one of the
// manager's workers.
type stackApp struct{ onWorker chan bool }

func (stackApp) Init() (Model, error) { return 0, nil }

func (a stackApp) Update(m Model, msg Msg) (Model, error) {
	buf := make([]byte, 16<<10)
	a.onWorker <- strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*workers).work")
	return m.(int) + 1, nil
}

func (stackApp) View(Model) Node { return Button{ID: "inc", OnClick: "inc"} }

// A call made with RunHere runs its update on the caller's goroutine when
// the session is idle; without it, on a worker. Either way it is applied.
func TestRunHereRunsAnIdleSessionsUpdateOnTheCaller(t *testing.T) {
	onWorker := make(chan bool, 4)
	r := NewRegistry()
	if err := r.Register("stack", "", func() App { return stackApp{onWorker} }); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"stack"}, Store: NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx := context.Background()
	if _, err := m.Start(ctx, "s", "stack", "p"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		ctx      context.Context
		onWorker bool
	}{
		{"plain call", ctx, true},
		{"RunHere", RunHere(ctx), false},
		{"plain call again", ctx, true},
	} {
		// The worker of the call before may still be announcing its
		// events: a call then queues for it, RunHere or not.
		eventually(t, func() bool { return !draining(m, "s") })
		res, err := m.Call(c.ctx, "s", "s.inc.click", nil)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", c.name, err, res)
		}
		if got := <-onWorker; got != c.onWorker {
			t.Errorf("%s: update on a worker = %v, want %v", c.name, got, c.onWorker)
		}
	}
	if model, err := m.Model("s"); err != nil || string(model) != "3" {
		t.Errorf("model %s (%v) after three acknowledged clicks", model, err)
	}
}

// draining reports whether session id's queue is being run.
func draining(m *Manager, id string) bool {
	a, err := m.running(id)
	if err != nil {
		return false
	}
	a.qmu.Lock()
	defer a.qmu.Unlock()
	return a.draining
}
