package apps

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/session"
)

// Jobs runs jobs that take seconds, the demo of a call that becomes a
// task: pick a duration, press run, and the job works outside the
// session (a command), reporting progress at every step, while the
// session keeps serving calls; the finished job is recorded in the model.
// A job in flight is not part of the model: a session moved to another
// node or recovered after its owner's loss has only the jobs that ended.
type Jobs struct {
	// MaxSeconds bounds a job's duration, the options of the duration list
	// (default 5, DefaultJobSeconds; the node's jobs-max-seconds).
	MaxSeconds int
	// Step is the time between two progress reports (default 250 ms, four
	// steps a second); tests shorten it.
	Step time.Duration
}

// Bounds of the jobs demo.
const (
	// DefaultJobSeconds is the longest job by default: well within the
	// 10 s a node gives a call it forwards to another node's session when
	// the caller set no deadline (a task's TTL is its deadline).
	DefaultJobSeconds = 5
	// JobsKept is how many finished jobs the model keeps, the newest.
	JobsKept = 20
	// jobStepsPerSecond is how many steps (progress reports) a second of
	// job takes.
	jobStepsPerSecond = 4
)

// JobsModel is Jobs' state.
type JobsModel struct {
	// Seconds is the duration of the next job.
	Seconds int `json:"seconds"`
	// Next is the number of the next job.
	Next int `json:"next"`
	// Done are the finished jobs, oldest first, at most JobsKept.
	Done []JobRecord `json:"done"`
}

// JobRecord is a job that ended.
type JobRecord struct {
	ID      int `json:"id"`
	Seconds int `json:"seconds"`
	// Steps of Total were done; Outcome is "finished", "cancelled" or
	// "timed out".
	Steps   int    `json:"steps"`
	Total   int    `json:"total"`
	Outcome string `json:"outcome"`
}

// JobsMsg is a button message of Jobs: "run" or "clear".
type JobsMsg string

// JobDone is the message a job's command ends with.
type JobDone JobRecord

func (j Jobs) maxSeconds() int {
	if j.MaxSeconds <= 0 {
		return DefaultJobSeconds
	}
	return j.MaxSeconds
}

func (j Jobs) step() time.Duration {
	if j.Step <= 0 {
		return time.Second / jobStepsPerSecond
	}
	return j.Step
}

// Init implements session.App.
func (Jobs) Init() (session.Model, error) { return JobsModel{Seconds: 1, Next: 1}, nil }

// Update implements session.App.
func (j Jobs) Update(m session.Model, msg session.Msg) (session.Model, error) {
	s, err := modelAs[JobsModel](m)
	if err != nil {
		return nil, err
	}
	switch msg := msg.(type) {
	case session.Select:
		if msg.Index < 0 || msg.Index >= j.maxSeconds() {
			return nil, fmt.Errorf("a job takes 1 to %d seconds (jobs-max-seconds), not option %d", j.maxSeconds(), msg.Index)
		}
		s.Seconds = msg.Index + 1
	case JobsMsg:
		switch msg {
		case "run":
			if s.Seconds < 1 || s.Seconds > j.maxSeconds() {
				return nil, fmt.Errorf("a job takes 1 to %d seconds (jobs-max-seconds), not %d", j.maxSeconds(), s.Seconds)
			}
			id := s.Next
			s.Next++
			return session.WithCommand(s, j.job(id, s.Seconds)), nil
		case "clear":
			s.Done = nil
		default:
			return nil, fmt.Errorf("unknown jobs message %q", string(msg))
		}
	case JobDone:
		done := make([]JobRecord, 0, min(len(s.Done)+1, JobsKept))
		done = append(done, s.Done[max(0, len(s.Done)+1-JobsKept):]...)
		s.Done = append(done, JobRecord(msg))
	default:
		return nil, fmt.Errorf("jobs does not handle %T", msg)
	}
	return s, nil
}

// job is the command of job id: it reports each step's progress and ends
// with how far it got, stopping early when its context ends.
func (j Jobs) job(id, seconds int) session.Command {
	step := j.step()
	return func(ctx context.Context) session.Msg {
		total := seconds * jobStepsPerSecond
		rec := JobDone{ID: id, Seconds: seconds, Total: total, Outcome: "finished"}
		progress := session.ProgressFrom(ctx)
		tick := time.NewTicker(step)
		defer tick.Stop()
		for rec.Steps < total {
			select {
			case <-tick.C:
			case <-ctx.Done():
				rec.Outcome = "cancelled"
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					rec.Outcome = "timed out"
				}
				return rec
			}
			rec.Steps++
			progress(float64(rec.Steps), float64(total), fmt.Sprintf("job %d: step %d of %d", id, rec.Steps, total))
		}
		return rec
	}
}

// View implements session.App.
func (j Jobs) View(m session.Model) session.Node {
	s, _ := modelAs[JobsModel](m)
	options := make([]string, j.maxSeconds())
	for i := range options {
		options[i] = strconv.Itoa(i+1) + " s"
	}
	var done strings.Builder
	for _, r := range s.Done {
		fmt.Fprintf(&done, "job %d (%d s): %s after %d of %d steps\n", r.ID, r.Seconds, r.Outcome, r.Steps, r.Total)
	}
	if len(s.Done) == 0 {
		done.WriteString("no job has ended yet")
	}
	return session.Column{Items: []session.Node{
		session.SelectList{ID: "seconds", Label: "Duration", Options: options, Selected: s.Seconds - 1},
		session.Button{ID: "run", Label: fmt.Sprintf("Run job %d (%d s)", s.Next, s.Seconds), OnClick: JobsMsg("run"), StartsCommand: true},
		session.Text{ID: "done", Text: strings.TrimSuffix(done.String(), "\n")},
		session.Button{ID: "clear", Label: "Clear", OnClick: JobsMsg("clear"), Disabled: len(s.Done) == 0},
	}}
}

// Resources implements session.ResourceProvider.
func (Jobs) Resources() []session.Projection {
	return []session.Projection{{Key: "jobs", Description: "The jobs that ended, oldest first.", Project: func(m session.Model) any {
		s, _ := modelAs[JobsModel](m)
		if s.Done == nil {
			return []JobRecord{}
		}
		return s.Done
	}}}
}
