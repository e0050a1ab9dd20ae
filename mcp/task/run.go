package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"
)

// run is one task running on this node.
type run struct {
	// id and tool never change (rec does, under mu).
	id, tool string
	svc      *Service
	ctx      context.Context
	cancel   context.CancelCauseFunc
	h        Handler
	// first carries the handler's first outcome to Start (which may
	// answer it directly); parks tells Start the handler asked its client
	// before the task existed; created closes once the record is created,
	// abandoned when Start answered without a task (or failed to create it).
	first     chan Outcome
	parks     chan struct{}
	created   chan struct{}
	abandoned chan struct{}

	// mu guards what follows and serialises the record's writes.
	mu  sync.Mutex
	rec Record
	// asks are the handler's client requests waiting for a response, by
	// key; nextAsk numbers their keys.
	asks    map[string]*ask
	nextAsk int
	// mrtr holds a multi round-trip handler's pending input (key →
	// request) and the responses in so far; resume hands the full round
	// to the parked handler.
	mrtr      map[string]json.RawMessage
	responses map[string]json.RawMessage
	resume    chan Round
	state     string
	// lastProgress is when a progress message was last written.
	lastProgress time.Time
}

type ask struct {
	req json.RawMessage
	ch  chan json.RawMessage
}

func (r *run) abandon() {
	close(r.abandoned)
	r.cancel(context.Canceled)
}

// work runs the handler until the task is settled (or Start answered
// without a task).
func (r *run) work() {
	defer r.svc.forget(r)
	defer r.cancel(nil)
	round := Round{}
	for i := 0; ; i++ {
		out := r.call(round)
		if i == 0 {
			r.first <- out
		}
		select {
		case <-r.created:
		case <-r.abandoned:
			return
		}
		if out.Input == nil || r.ctx.Err() != nil {
			r.settle(out)
			return
		}
		if i+1 >= maxRounds {
			r.settle(Outcome{Err: &Error{Code: CodeInternal, Message: fmt.Sprintf("multi round-trip: handler asked for input more than %d times", maxRounds)}})
			return
		}
		var ok bool
		if round, ok = r.park(out); !ok {
			r.settle(Outcome{})
			return
		}
	}
}

// call runs the handler once; a panic is the task's failure.
func (r *run) call(round Round) (out Outcome) {
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Err: &Error{Code: CodeInternal, Message: fmt.Sprintf("panic recovered in %s tool handler: %v", r.tool, p)}}
		}
	}()
	return r.h(r.ctx, round)
}

// settle writes the task's end: out, unless the task was cancelled, its
// TTL ran out or the service closed meanwhile.
func (r *run) settle(out Outcome) {
	switch cause := context.Cause(r.ctx); {
	case errors.Is(cause, ErrCancelled):
		r.change(func(rec Record, now time.Time) Record { return Cancel(rec, now) })
		return
	case errors.Is(cause, errExpired), errors.Is(cause, ErrClosed):
		out = Outcome{Err: &Error{Code: CodeInternal, Message: cause.Error()}}
	}
	r.change(func(rec Record, now time.Time) Record { return Settle(rec, out, r.svc.limits.MaxResultBytes, now) })
}

// change writes f(record) unless the record is terminal, holding mu so
// writes of one task are ordered.
func (r *run) change(f func(Record, time.Time) Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changeLocked(f)
}

func (r *run) changeLocked(f func(Record, time.Time) Record) {
	if !Moves(r.rec.Status) {
		return
	}
	next := f(r.rec, r.svc.now())
	ctx, cancel := context.WithTimeout(context.Background(), putTimeout)
	defer cancel()
	if err := r.svc.store.Put(ctx, next); err != nil {
		r.svc.log.Warn("writing a task's state", "task", next.ID, "status", next.Status, "err", err)
		return
	}
	r.rec = next
}

// cancelled acts on a cancel request: the record ends cancelled at once
// and the handler's context is cancelled.
func (r *run) cancelled() {
	r.change(func(rec Record, now time.Time) Record { return Cancel(rec, now) })
	r.cancel(ErrCancelled)
}

// pendingLocked is the record's inputRequests: the asks and the multi
// round-trip input still unanswered.
func (r *run) pendingLocked() json.RawMessage {
	m := make(map[string]json.RawMessage, len(r.asks)+len(r.mrtr))
	for k, a := range r.asks {
		m[k] = a.req
	}
	for k, q := range r.mrtr {
		if _, answered := r.responses[k]; !answered {
			m[k] = q
		}
	}
	return encodeMap(m)
}

// showPendingLocked writes the record's status from what is pending.
func (r *run) showPendingLocked() {
	pending := r.pendingLocked()
	r.changeLocked(func(rec Record, now time.Time) Record {
		rec.InputRequests, rec.Updated = pending, now
		rec.Status = Working
		if pending != nil {
			rec.Status = InputRequired
		}
		return rec
	})
}

// ask parks the task on one client request until a response for its key
// arrives or ctx ends.
func (r *run) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	select {
	case r.parks <- struct{}{}:
	default:
	}
	select {
	case <-r.created:
	case <-r.abandoned:
		return nil, fmt.Errorf("asking the client %s: %w", method, ErrNotInTask)
	case <-ctx.Done():
		return nil, fmt.Errorf("asking the client %s: %w", method, context.Cause(ctx))
	}
	a := &ask{req: body, ch: make(chan json.RawMessage, 1)}
	r.mu.Lock()
	r.nextAsk++
	key := "ask-" + strconv.Itoa(r.nextAsk)
	r.asks[key] = a
	r.showPendingLocked()
	r.mu.Unlock()
	select {
	case resp := <-a.ch:
		return resp, nil
	case <-ctx.Done():
		r.mu.Lock()
		if _, still := r.asks[key]; still {
			delete(r.asks, key)
			r.showPendingLocked()
		}
		r.mu.Unlock()
		return nil, fmt.Errorf("waiting for the client's answer to %s: %w", method, context.Cause(ctx))
	}
}

// park shows a multi round-trip handler's input requests and waits until
// every key is answered; false when the task's context ended first.
func (r *run) park(out Outcome) (Round, bool) {
	r.mu.Lock()
	r.mrtr, r.responses, r.state = decodeMap(out.Input), map[string]json.RawMessage{}, out.State
	r.resume = make(chan Round, 1)
	resume := r.resume
	r.showPendingLocked()
	r.mu.Unlock()
	select {
	case round := <-resume:
		return round, true
	case <-r.ctx.Done():
		return Round{}, false
	}
}

// respond hands input responses to the asks and the parked handler they
// answer; keys nobody waits for are ignored (a repeated event).
func (r *run) respond(resps map[string]json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	touched := false
	for k, v := range resps {
		if a, ok := r.asks[k]; ok {
			delete(r.asks, k)
			a.ch <- v
			touched = true
		} else if _, ok := r.mrtr[k]; ok && r.responses != nil {
			r.responses[k] = v
			touched = true
		}
	}
	if !touched {
		return
	}
	if r.mrtr != nil && len(r.responses) >= len(r.mrtr) {
		b, _ := json.Marshal(maps.Clone(r.responses))
		r.resume <- Round{Responses: b, State: r.state}
		r.mrtr, r.responses = nil, nil
	}
	r.showPendingLocked()
}

// progress writes msg as the status message, at most once per poll
// interval.
func (r *run) progress(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.svc.now()
	if now.Sub(r.lastProgress) < r.svc.limits.PollInterval || r.rec.Message == msg {
		return
	}
	select {
	case <-r.created:
	default:
		return
	}
	r.lastProgress = now
	r.changeLocked(func(rec Record, now time.Time) Record {
		rec.Message, rec.Updated = msg, now
		return rec
	})
}

// forget drops a finished run.
func (s *Service) forget(r *run) {
	s.mu.Lock()
	if s.running[r.id] == r {
		delete(s.running, r.id)
	}
	s.mu.Unlock()
}
