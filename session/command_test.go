package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// worker is a test app whose "work" button starts a command that takes
// two steps, each released by the test, and records how it ended.
type worker struct {
	started chan struct{} // one per command that began
	step    chan struct{} // each receive lets a running command take a step
}

type workerModel struct {
	Count    int      `json:"count"`
	Started  int      `json:"started"`
	Finished []string `json:"finished"`
}

// workDone is a work command's message.
type workDone struct {
	Steps int
	Err   string
	Bad   bool // the app refuses this result: its update fails
}

func (w *worker) Init() (Model, error) { return workerModel{}, nil }

func (w *worker) Update(m Model, msg Msg) (Model, error) {
	wm := m.(workerModel)
	wm.Finished = slices.Clone(wm.Finished)
	switch msg := msg.(type) {
	case string:
		switch msg {
		case "inc":
			wm.Count++
		case "work", "bad":
			wm.Started++
			return WithCommand(wm, w.work(msg == "bad")), nil
		case "panic":
			return WithCommand(wm, func(context.Context) Msg { panic("the work broke") }), nil
		case "nothing":
			return WithCommand(wm, func(context.Context) Msg { return nil }), nil
		}
	case workDone:
		if msg.Bad {
			return nil, errors.New("the job's result was refused")
		}
		if msg.Err != "" {
			wm.Finished = append(wm.Finished, fmt.Sprintf("stopped after %d steps: %s", msg.Steps, msg.Err))
		} else {
			wm.Finished = append(wm.Finished, fmt.Sprintf("done after %d steps", msg.Steps))
		}
	}
	return wm, nil
}

func (w *worker) work(bad bool) Command {
	return func(ctx context.Context) Msg {
		w.started <- struct{}{}
		for i := 1; i <= 2; i++ {
			select {
			case <-w.step:
			case <-ctx.Done():
				return workDone{Steps: i - 1, Err: ctx.Err().Error()}
			}
			ProgressFrom(ctx)(float64(i), 2, fmt.Sprintf("step %d of 2", i))
		}
		return workDone{Steps: 2, Bad: bad}
	}
}

func (w *worker) View(m Model) Node {
	wm := m.(workerModel)
	return Column{Items: []Node{
		Text{ID: "count", Text: fmt.Sprint(wm.Count)},
		Button{ID: "inc", Label: "+", OnClick: "inc"},
		Button{ID: "work", Label: "Work", OnClick: "work", StartsCommand: true},
		Button{ID: "bad", Label: "Bad", OnClick: "bad", StartsCommand: true},
		Button{ID: "panic", Label: "Panic", OnClick: "panic", StartsCommand: true},
		Button{ID: "nothing", Label: "Nothing", OnClick: "nothing", StartsCommand: true},
	}}
}

type workerFixture struct {
	t     *testing.T
	m     *Manager
	w     *worker
	store *MemoryStore
}

func newWorkerFixture(t *testing.T, adjust func(*ManagerConfig)) *workerFixture {
	t.Helper()
	w := &worker{started: make(chan struct{}, 8), step: make(chan struct{})}
	r := NewRegistry()
	if err := r.Register("worker", "test app with commands", func() App { return w }); err != nil {
		t.Fatal(err)
	}
	store := NewMemoryStore()
	cfg := ManagerConfig{Registry: r, Startable: []string{"worker"}, Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if adjust != nil {
		adjust(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if _, err := m.Start(context.Background(), "s", "worker", "alice"); err != nil {
		t.Fatal(err)
	}
	return &workerFixture{t: t, m: m, w: w, store: store}
}

// callAsync calls tool in the background; the answer arrives on the
// returned channel.
func (f *workerFixture) callAsync(ctx context.Context, tool string) <-chan callAnswer {
	out := make(chan callAnswer, 1)
	go func() {
		res, err := f.m.Call(ctx, "s", "s."+tool, nil)
		out <- callAnswer{res, err}
	}()
	return out
}

type callAnswer struct {
	res Result
	err error
}

func (f *workerFixture) model() workerModel {
	f.t.Helper()
	b, err := f.m.Model("s")
	if err != nil {
		f.t.Fatal(err)
	}
	var wm workerModel
	if err := jsonUnmarshal(b, &wm); err != nil {
		f.t.Fatal(err)
	}
	return wm
}

// TestACommandRunsOutsideTheSessionAndItsCallAnswersWithTheFinalUpdate: a
// click whose update starts a command answers once the command's message
// is applied, with that update's result; the command's progress reaches
// the call, and the session serves other calls while it runs.
func TestACommandRunsOutsideTheSessionAndItsCallAnswersWithTheFinalUpdate(t *testing.T) {
	f := newWorkerFixture(t, nil)
	var mu sync.Mutex
	var progress []string
	ctx := WithProgress(context.Background(), func(p, total float64, msg string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, fmt.Sprintf("%g/%g %s", p, total, msg))
	})
	answer := f.callAsync(ctx, "work.click")
	<-f.w.started

	// The session is free while the command works.
	if res := callOK(t, f.m, "s.inc.click"); res.IsError {
		t.Fatalf("a call while the command runs: %s", res.Text)
	}
	if wm := f.model(); wm.Count != 1 || wm.Started != 1 || len(wm.Finished) != 0 {
		t.Fatalf("model while the command runs = %+v; want the click applied, the work not finished", wm)
	}
	select {
	case a := <-answer:
		t.Fatalf("the call answered before its command finished: %+v", a)
	default:
	}

	f.w.step <- struct{}{}
	f.w.step <- struct{}{}
	a := <-answer
	if a.err != nil || a.res.IsError {
		t.Fatalf("call = %+v", a)
	}
	if want := "click on widget `work`: its command finished and its message was applied"; a.res.Text != want {
		t.Errorf("result %q, want %q", a.res.Text, want)
	}
	if wm := f.model(); !slices.Equal(wm.Finished, []string{"done after 2 steps"}) {
		t.Errorf("finished = %v", wm.Finished)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"1/2 step 1 of 2", "2/2 step 2 of 2"}; !slices.Equal(progress, want) {
		t.Errorf("progress = %v, want %v", progress, want)
	}
}

func callOK(t *testing.T, m *Manager, tool string) Result {
	t.Helper()
	res, err := m.Call(context.Background(), "s", tool, nil)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// TestAButtonThatStartsACommandDerivesATaskTool: the declaration reaches
// the derived tool, and only there.
func TestAButtonThatStartsACommandDerivesATaskTool(t *testing.T) {
	f := newWorkerFixture(t, nil)
	tools, err := f.m.Tools("s")
	if err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for _, tl := range tools {
		if tl.Task {
			tasks = append(tasks, tl.Name)
		}
	}
	if want := []string{"s.work.click", "s.bad.click", "s.panic.click", "s.nothing.click"}; !slices.Equal(tasks, want) {
		t.Errorf("task tools = %v, want %v", tasks, want)
	}
}

// TestTheCommandBoundRefusesTheUpdate: past MaxCommands the update asking
// for one more is refused with a reason naming the setting, the model
// keeps its value, and a command that ends makes room.
func TestTheCommandBoundRefusesTheUpdate(t *testing.T) {
	f := newWorkerFixture(t, func(c *ManagerConfig) { c.MaxCommands = 1 })
	first := f.callAsync(context.Background(), "work.click")
	<-f.w.started
	res := callOK(t, f.m, "s.work.click")
	if !res.IsError || !strings.Contains(res.Text, "already runs 1 commands, its limit (session-commands)") {
		t.Fatalf("a command past the bound: %+v", res)
	}
	if wm := f.model(); wm.Started != 1 {
		t.Errorf("started = %d after a refused update, want 1", wm.Started)
	}
	f.w.step <- struct{}{}
	f.w.step <- struct{}{}
	if a := <-first; a.err != nil || a.res.IsError {
		t.Fatalf("first call = %+v", a)
	}
	second := f.callAsync(context.Background(), "work.click")
	<-f.w.started
	f.w.step <- struct{}{}
	f.w.step <- struct{}{}
	if a := <-second; a.err != nil || a.res.IsError {
		t.Fatalf("a command once the first ended = %+v", a)
	}
}

// TestCancellingTheCallCancelsItsCommand: the call answers the
// cancellation, the command sees it, and the message it ends with is
// applied, so the model records how the work ended.
func TestCancellingTheCallCancelsItsCommand(t *testing.T) {
	f := newWorkerFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	answer := f.callAsync(ctx, "work.click")
	<-f.w.started
	f.w.step <- struct{}{}
	cancel()
	a := <-answer
	if !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled call = %+v; want context.Canceled", a)
	}
	eventually(t, func() bool { return len(f.model().Finished) == 1 })
	if wm := f.model(); wm.Finished[0] != "stopped after 1 steps: context canceled" {
		t.Errorf("finished = %v", wm.Finished)
	}
	a2 := f.m.actor("s")
	eventually(t, func() bool { return a2.commands() == 0 })
}

// TestTheFinalUpdatesFailureIsTheCallsResult: when the update applying
// the command's message fails, the call fails with it and the model stays
// as the update that started the command left it.
func TestTheFinalUpdatesFailureIsTheCallsResult(t *testing.T) {
	f := newWorkerFixture(t, nil)
	answer := f.callAsync(context.Background(), "bad.click")
	<-f.w.started
	f.w.step <- struct{}{}
	f.w.step <- struct{}{}
	a := <-answer
	if a.err != nil || !a.res.IsError || !strings.Contains(a.res.Text, "the job's result was refused") {
		t.Fatalf("call = %+v; want the final update's error", a)
	}
	if wm := f.model(); wm.Started != 1 || len(wm.Finished) != 0 {
		t.Errorf("model = %+v", wm)
	}
}

// TestACommandThatPanicsOrReturnsNothing: a panic is the call's error and
// applies nothing; a nil message answers at once with nothing applied.
func TestACommandThatPanicsOrReturnsNothing(t *testing.T) {
	f := newWorkerFixture(t, nil)
	res := callOK(t, f.m, "s.panic.click")
	if !res.IsError || !strings.Contains(res.Text, "command panicked: the work broke") {
		t.Errorf("panicking command: %+v", res)
	}
	res = callOK(t, f.m, "s.nothing.click")
	if res.IsError || !strings.Contains(res.Text, "its command finished with nothing to apply") {
		t.Errorf("command with no message: %+v", res)
	}
}

// TestACommandInFlightIsNotHandedOff: a session detached (handed to
// another node) while a command runs cancels it; the call fails saying
// its result was not applied, and the snapshot holds the last applied
// update's model.
func TestACommandInFlightIsNotHandedOff(t *testing.T) {
	f := newWorkerFixture(t, nil)
	answer := f.callAsync(context.Background(), "work.click")
	<-f.w.started
	snap, err := f.m.Detach(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	a := <-answer
	if !errors.Is(a.err, ErrCommandLost) || errors.Is(a.err, ErrNotRunning) || !strings.Contains(a.err.Error(), "its result was not applied") {
		t.Fatalf("call of a detached session's command = %+v", a)
	}
	var wm workerModel
	if err := jsonUnmarshal(snap.Model, &wm); err != nil {
		t.Fatal(err)
	}
	if wm.Started != 1 || len(wm.Finished) != 0 {
		t.Errorf("detached model = %+v; want the click that started the work, nothing finished", wm)
	}
	// Adopted again, it serves calls and runs no command.
	if _, err := f.m.Adopt(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	if a := f.m.actor("s"); a.commands() != 0 {
		t.Errorf("adopted session runs %d commands", a.commands())
	}
}

// TestInitCannotStartACommand: Init has no call to answer, so a command
// from it is refused with a reason.
func TestInitCannotStartACommand(t *testing.T) {
	r := NewRegistry()
	if err := r.Register("eager", "starts work in Init", func() App { return eager{} }); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"eager"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if _, err := m.Start(context.Background(), "e", "eager", "alice"); err == nil || !strings.Contains(err.Error(), "Init returned a command") {
		t.Errorf("start = %v", err)
	}
}

type eager struct{}

func (eager) Init() (Model, error) {
	return WithCommand(0, func(context.Context) Msg { return nil }), nil
}
func (eager) Update(m Model, _ Msg) (Model, error) { return m, nil }
func (eager) View(Model) Node                      { return Text{ID: "t", Text: "x"} }

// slowInit loads its first model until released or cancelled, reporting
// progress.
type slowInit struct {
	release chan struct{}
	began   chan struct{}
}

func (s slowInit) InitContext(ctx context.Context) (Model, error) {
	ProgressFrom(ctx)(1, 2, "loading")
	s.began <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, fmt.Errorf("loading: %w", ctx.Err())
	}
	ProgressFrom(ctx)(2, 2, "loaded")
	return 42, nil
}
func (slowInit) Init() (Model, error)                 { return 0, nil }
func (slowInit) Update(m Model, _ Msg) (Model, error) { return m, nil }
func (slowInit) View(Model) Node                      { return Text{ID: "t", Text: "x"} }

// TestASlowInitGetsTheStartsContext: InitContext runs with the start's
// context, reporting its progress, and a cancelled start starts nothing.
func TestASlowInitGetsTheStartsContext(t *testing.T) {
	app := slowInit{release: make(chan struct{}), began: make(chan struct{}, 2)}
	r := NewRegistry()
	if err := r.Register("slow", "loads for a while", func() App { return app }); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"slow"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())

	var progress []string
	ctx := WithProgress(context.Background(), func(p, total float64, msg string) {
		progress = append(progress, fmt.Sprintf("%g/%g %s", p, total, msg))
	})
	go func() { <-app.began; app.release <- struct{}{} }()
	if _, err := m.Start(ctx, "a", "slow", "alice"); err != nil {
		t.Fatal(err)
	}
	if b, _ := m.Model("a"); string(b) != "42" {
		t.Errorf("model = %s, want InitContext's 42", b)
	}
	if want := []string{"1/2 loading", "2/2 loaded"}; !slices.Equal(progress, want) {
		t.Errorf("progress = %v, want %v", progress, want)
	}

	cctx, cancel := context.WithCancel(context.Background())
	go func() { <-app.began; cancel() }()
	if _, err := m.Start(cctx, "b", "slow", "alice"); !errors.Is(err, context.Canceled) {
		t.Errorf("a start cancelled during InitContext = %v, want context.Canceled", err)
	}
	if _, ok := m.Get("b"); ok {
		t.Error("a cancelled start left a session")
	}
}
