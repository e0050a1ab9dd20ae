package apps

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
	"time"

	"github.com/mcpswarm/mcpswarm/session"
)

// startJobs runs a jobs session with app's settings under a real Manager.
func startJobs(t *testing.T, app Jobs, adjust func(*session.ManagerConfig)) *harness {
	t.Helper()
	r := session.NewRegistry()
	if err := r.Register("jobs", "jobs", func() session.App { return app }); err != nil {
		t.Fatal(err)
	}
	cfg := session.ManagerConfig{Registry: r, Startable: []string{"jobs"}, Store: session.NewMemoryStore(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if adjust != nil {
		adjust(&cfg)
	}
	m, err := session.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if _, err := m.Start(context.Background(), "s1", "jobs", "alice"); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, m: m, id: "s1", ctx: context.Background()}
}

// TestAJobReportsEveryStepAndIsRecorded: a two-second job reports each of
// its eight steps, in order, through the call, which answers once the job
// is in the model.
func TestAJobReportsEveryStepAndIsRecorded(t *testing.T) {
	h := startJobs(t, Jobs{Step: time.Millisecond}, nil)
	h.call("seconds.select", map[string]any{"option": "2 s"})
	var mu sync.Mutex
	var got []string
	h.ctx = session.WithProgress(context.Background(), func(p, total float64, msg string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%g/%g %s", p, total, msg))
	})
	h.call("run.click", nil)
	mu.Lock()
	var want []string
	for i := 1; i <= 8; i++ {
		want = append(want, fmt.Sprintf("%d/8 job 1: step %d of 8", i, i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("progress = %v, want %v", got, want)
	}
	mu.Unlock()
	var m JobsModel
	h.model(&m)
	if want := []JobRecord{{ID: 1, Seconds: 2, Steps: 8, Total: 8, Outcome: "finished"}}; !slices.Equal(m.Done, want) || m.Next != 2 {
		t.Errorf("model = %+v, want job 1 finished and job 2 next", m)
	}
}

// TestAJobLeavesTheSessionFreeAndEndsWithItsCall: while a job runs the
// session answers other calls; cancelling the job's call cancels the job,
// which is recorded as cancelled.
func TestAJobLeavesTheSessionFreeAndEndsWithItsCall(t *testing.T) {
	h := startJobs(t, Jobs{Step: time.Hour}, nil) // never takes a step on its own
	ctx, cancel := context.WithCancel(context.Background())
	answer := make(chan error, 1)
	go func() {
		_, err := h.m.Call(ctx, h.id, h.id+".run.click", nil)
		answer <- err
	}()
	// The click is applied (job 2 is next) while job 1 runs, and the
	// session takes other calls meanwhile.
	eventually(t, func() bool {
		var m JobsModel
		h.model(&m)
		return m.Next == 2
	})
	h.call("seconds.select", map[string]any{"option": "3 s"})
	var m JobsModel
	h.model(&m)
	if m.Seconds != 3 || len(m.Done) != 0 {
		t.Fatalf("model while job 1 runs = %+v", m)
	}
	cancel()
	if err := <-answer; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job's call = %v", err)
	}
	eventually(t, func() bool {
		h.model(&m)
		return len(m.Done) == 1
	})
	if want := (JobRecord{ID: 1, Seconds: 1, Steps: 0, Total: 4, Outcome: "cancelled"}); m.Done[0] != want {
		t.Errorf("cancelled job recorded as %+v, want %+v", m.Done[0], want)
	}
}

// TestAJobPastTheCommandTimeoutIsRecordedAsTimedOut: the runtime's bound
// on a command ends the job, and the call answers its record.
func TestAJobPastTheCommandTimeoutIsRecordedAsTimedOut(t *testing.T) {
	h := startJobs(t, Jobs{Step: time.Hour}, func(c *session.ManagerConfig) { c.CommandTimeout = 20 * time.Millisecond })
	h.call("run.click", nil)
	var m JobsModel
	h.model(&m)
	if len(m.Done) != 1 || m.Done[0].Outcome != "timed out" {
		t.Errorf("model = %+v, want job 1 timed out", m)
	}
}

// TestJobsBounds: a duration past MaxSeconds is refused with the setting's
// name, the options list no more, and the model keeps the newest JobsKept
// jobs.
func TestJobsBounds(t *testing.T) {
	app := Jobs{MaxSeconds: 3}
	if opts := app.View(JobsModel{Seconds: 1}).(session.Column).Items[0].(session.SelectList).Options; len(opts) != 3 {
		t.Errorf("options = %v, want 3", opts)
	}
	if _, err := app.Update(JobsModel{Seconds: 1}, session.Select{Index: 3}); err == nil || !strings.Contains(err.Error(), "jobs-max-seconds") {
		t.Errorf("a 4 s job with a 3 s bound: %v", err)
	}
	if _, err := app.Update(JobsModel{Seconds: 9}, JobsMsg("run")); err == nil || !strings.Contains(err.Error(), "jobs-max-seconds") {
		t.Errorf("running a model's 9 s job with a 3 s bound: %v", err)
	}
	var m session.Model = JobsModel{Seconds: 1}
	for id := 1; id <= JobsKept+5; id++ {
		var err error
		if m, err = app.Update(m, JobDone{ID: id, Outcome: "finished"}); err != nil {
			t.Fatal(err)
		}
	}
	done := m.(JobsModel).Done
	if len(done) != JobsKept || done[0].ID != 6 || done[JobsKept-1].ID != JobsKept+5 {
		t.Errorf("kept %d jobs, %d to %d; want the newest %d", len(done), done[0].ID, done[len(done)-1].ID, JobsKept)
	}
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("condition not met within 5s")
		}
	}
}
