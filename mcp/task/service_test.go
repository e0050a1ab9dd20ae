package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/poll"

	"go.uber.org/goleak"

	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/task/tasktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newService(t *testing.T, l task.Limits) (*task.Service, *tasktest.Table) {
	t.Helper()
	tab := tasktest.NewTable()
	s := task.NewService(task.Config{Node: "n1", Store: tab.Node("n1"), Limits: l})
	t.Cleanup(s.Close)
	return s, tab
}

func result(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	return b
}

// await polls cond until it holds or 10 s passed.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.True(t, 10*time.Second, what, cond)
}

func start(t *testing.T, s *task.Service, principal string, h task.Handler) task.Record {
	t.Helper()
	st, err := s.Start(context.Background(), task.Spec{Principal: principal, Tool: "tool", Form: task.Extension}, h)
	if err != nil {
		t.Fatal(err)
	}
	if st.Outcome != nil {
		t.Fatal("answered without a task")
	}
	return st.Task
}

func wait(t *testing.T, s *task.Service, principal, id string) task.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.Wait(ctx, principal, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestATaskIsDurableBeforeItsHandleAndCompletes(t *testing.T) {
	s, tab := newService(t, task.Limits{})
	release := make(chan struct{})
	rec := start(t, s, "alice", func(ctx context.Context, _ task.Round) task.Outcome {
		<-release
		return task.Outcome{Result: result("done")}
	})
	if got, ok := tab.Raw(rec.ID); !ok || got.Status != task.Working || got.Principal != "alice" || got.Node != "n1" {
		t.Fatalf("stored when the handle was returned: %+v %v", got, ok)
	}
	close(release)
	got := wait(t, s, "alice", rec.ID)
	if got.Status != task.Completed || string(got.Result) != string(result("done")) {
		t.Fatalf("settled %+v", got)
	}
}

func TestAToolErrorCompletesAndAPanicFails(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	toolErr := start(t, s, "alice", func(context.Context, task.Round) task.Outcome {
		return task.Outcome{Result: result("bad input"), IsError: true}
	})
	if got := wait(t, s, "alice", toolErr.ID); got.Status != task.Completed {
		t.Errorf("a tool error: %s, want completed (2026 form)", got.Status)
	}
	panicked := start(t, s, "alice", func(context.Context, task.Round) task.Outcome { panic("kaboom") })
	got := wait(t, s, "alice", panicked.ID)
	if got.Status != task.Failed || got.Error == nil || !strings.Contains(got.Error.Message, "kaboom") || got.Result != nil {
		t.Errorf("a panic: %+v, want failed with the panic named", got)
	}
}

func TestACancelRequestCancelsTheHandler(t *testing.T) {
	s, tab := newService(t, task.Limits{})
	cause := make(chan error, 1)
	rec := start(t, s, "alice", func(ctx context.Context, _ task.Round) task.Outcome {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return task.Outcome{Result: result("too late")}
	})
	got, err := s.Cancel(context.Background(), "alice", rec.ID)
	if err != nil || got.Status != task.Cancelled {
		t.Fatalf("right after tasks/cancel: %s %v, want cancelled", got.Status, err)
	}
	if c := <-cause; !errors.Is(c, task.ErrCancelled) {
		t.Fatalf("the handler's context ended with %v", c)
	}
	await(t, "the record settled cancelled", func() bool { r, _ := tab.Raw(rec.ID); return r.Status == task.Cancelled })
	if r := wait(t, s, "alice", rec.ID); r.Result != nil {
		t.Fatalf("a cancelled task kept the late result %s", r.Result)
	}
}

func elicit(ctx context.Context, s *task.Service, msg string) (string, error) {
	raw, err := s.Ask(ctx, "elicitation/create", map[string]any{"message": msg})
	if err != nil {
		return "", err
	}
	var r struct {
		Content struct {
			Answer string `json:"answer"`
		} `json:"content"`
	}
	err = json.Unmarshal(raw, &r)
	return r.Content.Answer, err
}

func answer(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"answer": text}})
	return b
}

func pending(t *testing.T, s *task.Service, id string) map[string]json.RawMessage {
	t.Helper()
	r, err := s.Get("alice", id)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]json.RawMessage{}
	if r.Status == task.InputRequired {
		_ = json.Unmarshal(r.InputRequests, &m)
	}
	return m
}

func TestAnElicitInsideATaskParksItUntilTasksUpdate(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	rec := start(t, s, "alice", func(ctx context.Context, _ task.Round) task.Outcome {
		a, err := elicit(ctx, s, "name?")
		if err != nil {
			return task.Outcome{Err: &task.Error{Code: task.CodeInternal, Message: err.Error()}}
		}
		return task.Outcome{Result: result("hello " + a)}
	})
	var key string
	await(t, "input_required", func() bool {
		for k := range pending(t, s, rec.ID) {
			key = k
		}
		return key != ""
	})
	if q := pending(t, s, rec.ID)[key]; !strings.Contains(string(q), `"method":"elicitation/create"`) {
		t.Fatalf("the input request is %s", q)
	}
	resp, _ := json.Marshal(map[string]json.RawMessage{key: answer("bob")})
	if err := s.Update(context.Background(), "alice", rec.ID, resp); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, s, "alice", rec.ID); got.Status != task.Completed || !strings.Contains(string(got.Result), "hello bob") {
		t.Fatalf("settled %s %s", got.Status, got.Result)
	}
}

func TestTwoAsksWaitUnderTwoKeysAndAPartialAnswerLeavesOne(t *testing.T) {
	s, tab := newService(t, task.Limits{})
	rec := start(t, s, "alice", func(ctx context.Context, _ task.Round) task.Outcome {
		var wg sync.WaitGroup
		answers := make([]string, 2)
		for i := range 2 {
			wg.Go(func() { answers[i], _ = elicit(ctx, s, "q") })
		}
		wg.Wait()
		return task.Outcome{Result: result(answers[0] + "+" + answers[1])}
	})
	await(t, "two pending keys", func() bool { return len(pending(t, s, rec.ID)) == 2 })
	var keys []string
	for k := range pending(t, s, rec.ID) {
		keys = append(keys, k)
	}
	resp, _ := json.Marshal(map[string]json.RawMessage{keys[0]: answer("x")})
	if err := s.Update(context.Background(), "alice", rec.ID, resp); err != nil {
		t.Fatal(err)
	}
	// Read at once, before the runner acted: the answered key is gone.
	if p := pending(t, s, rec.ID); len(p) != 1 || p[keys[1]] == nil {
		t.Fatalf("right after a partial answer, pending %v, want only %s", p, keys[1])
	}
	await(t, "the runner to show one key", func() bool {
		r, _ := tab.Raw(rec.ID)
		return r.Status == task.InputRequired && !strings.Contains(string(r.InputRequests), keys[0])
	})
	resp, _ = json.Marshal(map[string]json.RawMessage{keys[1]: answer("y")})
	if err := s.Update(context.Background(), "alice", rec.ID, resp); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, s, "alice", rec.ID); got.Status != task.Completed {
		t.Fatalf("settled %s", got.Status)
	}
}

func TestAMultiRoundTripHandlerRunsAgainOnceEveryKeyIsAnswered(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	input := json.RawMessage(`{"a":{"method":"roots/list"},"b":{"method":"roots/list"}}`)
	rec := start(t, s, "alice", func(_ context.Context, r task.Round) task.Outcome {
		if r.Responses == nil {
			return task.Outcome{Input: input, State: "s1"}
		}
		return task.Outcome{Result: result(r.State + " " + string(r.Responses))}
	})
	await(t, "two pending keys", func() bool { return len(pending(t, s, rec.ID)) == 2 })
	for _, k := range []string{"a", "b"} {
		if err := s.Update(context.Background(), "alice", rec.ID, json.RawMessage(`{"`+k+`":{"roots":[]}}`)); err != nil {
			t.Fatal(err)
		}
	}
	got := wait(t, s, "alice", rec.ID)
	if got.Status != task.Completed || !strings.Contains(string(got.Result), `s1 {\"a\":{\"roots\":[]},\"b\":{\"roots\":[]}}`) {
		t.Fatalf("settled %s %s", got.Status, got.Result)
	}
}

func TestAnExpiredTaskIsUnknown(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	cause := make(chan error, 1)
	st, err := s.Start(context.Background(), task.Spec{Principal: "alice", Form: task.Extension, TTL: 50 * time.Millisecond},
		func(ctx context.Context, _ task.Round) task.Outcome {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return task.Outcome{}
		})
	if err != nil {
		t.Fatal(err)
	}
	await(t, "expiry", func() bool { _, err := s.Get("alice", st.Task.ID); return errors.Is(err, task.ErrUnknown) })
	if c := <-cause; c == nil || !strings.Contains(c.Error(), "TTL") {
		t.Fatalf("the handler's context ended with %v", c)
	}
	if _, e := s.Serve(context.Background(), "alice", task.MethodGet, json.RawMessage(`{"taskId":"`+st.Task.ID+`"}`), true); e == nil || e.Code != task.CodeInvalidParams {
		t.Fatalf("tasks/get of an expired task: %v", e)
	}
}

func TestLimitsRefuseWithTheirSetting(t *testing.T) {
	s, _ := newService(t, task.Limits{PerPrincipal: 1, MaxResultBytes: 16, MaxTTL: time.Minute})
	st, err := s.Start(context.Background(), task.Spec{Principal: "alice", Form: task.Extension, TTL: time.Hour},
		func(context.Context, task.Round) task.Outcome {
			return task.Outcome{Result: result("far more than sixteen bytes")}
		})
	if err != nil {
		t.Fatal(err)
	}
	if st.Task.TTL != time.Minute {
		t.Errorf("TTL %v, want clamped to a minute", st.Task.TTL)
	}
	_, err = s.Start(context.Background(), task.Spec{Principal: "alice", Form: task.Extension},
		func(context.Context, task.Round) task.Outcome { return task.Outcome{} })
	if !errors.Is(err, task.ErrTooMany) || !strings.Contains(err.Error(), "--task-per-principal") {
		t.Errorf("a second task: %v, want ErrTooMany naming its setting", err)
	}
	got := wait(t, s, "alice", st.Task.ID)
	if got.Status != task.Failed || !strings.Contains(got.Error.Message, "--task-max-result") {
		t.Errorf("an oversized result: %+v", got)
	}
	if _, err := s.Start(context.Background(), task.Spec{Principal: "bob", Form: task.Extension},
		func(context.Context, task.Round) task.Outcome { return task.Outcome{} }); err != nil {
		t.Errorf("bob is limited by alice's tasks: %v", err)
	}
}

func TestWithinTheGraceAnOutcomeMayAnswerDirectly(t *testing.T) {
	s, tab := newService(t, task.Limits{})
	spec := task.Spec{Principal: "alice", Form: task.Extension, Grace: 10 * time.Second,
		Sync: func(o task.Outcome) bool { return o.Input != nil }}
	st, err := s.Start(context.Background(), spec, func(context.Context, task.Round) task.Outcome {
		return task.Outcome{Input: json.RawMessage(`{"a":{"method":"roots/list"}}`)}
	})
	if err != nil || st.Outcome == nil || st.Task.ID != "" {
		t.Fatalf("an input_required within the grace: %+v %v, want a direct answer", st, err)
	}
	st, err = s.Start(context.Background(), spec, func(context.Context, task.Round) task.Outcome {
		return task.Outcome{Result: result("quick")}
	})
	if err != nil || st.Outcome != nil || st.Task.Status != task.Completed {
		t.Fatalf("a result Sync refuses: %+v %v, want a task created completed", st, err)
	}
	if r, _ := tab.Raw(st.Task.ID); r.Status != task.Completed {
		t.Fatalf("stored %s", r.Status)
	}
}

func TestAnAskWithinTheGraceCreatesTheTask(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	st, err := s.Start(context.Background(), task.Spec{Principal: "alice", Form: task.Extension, Grace: time.Hour},
		func(ctx context.Context, _ task.Round) task.Outcome {
			a, _ := elicit(ctx, s, "?")
			return task.Outcome{Result: result(a)}
		})
	if err != nil || st.Outcome != nil {
		t.Fatalf("%+v %v", st, err)
	}
	await(t, "input_required", func() bool { return len(pending(t, s, st.Task.ID)) == 1 })
	if _, err := s.Cancel(context.Background(), "alice", st.Task.ID); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, s, "alice", st.Task.ID); got.Status != task.Cancelled {
		t.Fatalf("settled %s", got.Status)
	}
}

func TestAnotherPrincipalsTaskAnswersAsAnUnknownOne(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	rec := start(t, s, "bob", func(ctx context.Context, _ task.Round) task.Outcome { <-ctx.Done(); return task.Outcome{} })
	ctx := context.Background()
	for _, c := range []struct {
		method string
		modern bool
	}{
		{task.MethodGet, true}, {task.MethodUpdate, true}, {task.MethodCancel, true},
		{task.MethodGet, false}, {task.MethodCancel, false}, {task.MethodResult, false},
	} {
		unknown := task.NewID()
		_, bobs := s.Serve(ctx, "alice", c.method, json.RawMessage(`{"taskId":"`+rec.ID+`","inputResponses":{}}`), c.modern)
		_, none := s.Serve(ctx, "alice", c.method, json.RawMessage(`{"taskId":"`+unknown+`","inputResponses":{}}`), c.modern)
		if bobs == nil || none == nil || bobs.Code != none.Code ||
			strings.ReplaceAll(bobs.Message, rec.ID, "ID") != strings.ReplaceAll(none.Message, unknown, "ID") {
			t.Errorf("%s (modern %v): bob's handle %v, an unknown one %v", c.method, c.modern, bobs, none)
		}
	}
	page, _ := s.Serve(ctx, "alice", task.MethodList, nil, false)
	if b, _ := json.Marshal(page); strings.Contains(string(b), rec.ID) {
		t.Errorf("alice's tasks/list shows bob's task: %s", b)
	}
	if r, err := s.Get("bob", rec.ID); err != nil || r.Status.Terminal() {
		t.Errorf("alice's requests changed bob's task: %+v %v", r, err)
	}
}

func TestCloseCancelsRunningTasksAndWaits(t *testing.T) {
	tab := tasktest.NewTable()
	s := task.NewService(task.Config{Node: "n1", Store: tab.Node("n1")})
	ended := make(chan error, 1)
	st, err := s.Start(context.Background(), task.Spec{Principal: "alice", Form: task.Extension},
		func(ctx context.Context, _ task.Round) task.Outcome {
			<-ctx.Done()
			ended <- context.Cause(ctx)
			return task.Outcome{}
		})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if c := <-ended; !errors.Is(c, task.ErrClosed) {
		t.Fatalf("the handler's context ended with %v", c)
	}
	if r, _ := tab.Raw(st.Task.ID); r.Status != task.Failed {
		t.Fatalf("a task cut short by Close is %s, want failed", r.Status)
	}
	if _, err := s.Start(context.Background(), task.Spec{Principal: "alice"}, nil); !errors.Is(err, task.ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

func TestNobodyHasTasks(t *testing.T) {
	s, _ := newService(t, task.Limits{})
	if _, err := s.Start(context.Background(), task.Spec{Form: task.Extension}, func(context.Context, task.Round) task.Outcome { return task.Outcome{} }); !errors.Is(err, task.ErrNoPrincipal) {
		t.Fatalf("a task for nobody: %v", err)
	}
	rec := start(t, s, "alice", func(context.Context, task.Round) task.Outcome { return task.Outcome{} })
	if _, err := s.Get("", rec.ID); !errors.Is(err, task.ErrUnknown) {
		t.Fatalf("nobody read alice's task: %v", err)
	}
}

// BenchmarkATaskFromStartToSettled is the service's own cost of one task
// (create, run, settle, read) over the in-memory store.
func BenchmarkATaskFromStartToSettled(b *testing.B) {
	tab := tasktest.NewTable()
	s := task.NewService(task.Config{Node: "n1", Store: tab.Node("n1")})
	defer s.Close()
	ctx := context.Background()
	res := result("done")
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		p := strconv.Itoa(n) // one principal each: the table's Of is not measured
		st, err := s.Start(ctx, task.Spec{Principal: p, Form: task.Extension},
			func(context.Context, task.Round) task.Outcome { return task.Outcome{Result: res} })
		if err != nil {
			b.Fatal(err)
		}
		if r, err := s.Wait(ctx, p, st.Task.ID); err != nil || r.Status != task.Completed {
			b.Fatalf("%+v %v", r, err)
		}
	}
}
