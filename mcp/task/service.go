package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Service runs the tasks of one node's front: it creates them in the
// Store (durable before a handle is returned), runs each handler in a
// goroutine on a context detached from the request that started it
// (ended by a cancel, the TTL or Close), settles the record, and serves
// the tasks/* methods of both forms from the Store's reads. It acts on the
// requests the Store hands it (Event.Request): a cancel cancels the
// handler, input responses reach the ask or the multi round-trip handler
// waiting for them.
type Service struct {
	node   string
	store  Store
	limits Limits
	log    *slog.Logger
	now    func() time.Time
	change func(Record)

	mu      sync.Mutex
	closed  bool
	running map[string]*run
	// waiters wake tasks/result calls when their task changes.
	waiters map[string][]chan struct{}
	wg      sync.WaitGroup
	unwatch func()
}

// Config configures a Service.
type Config struct {
	// Node is this node's name (Record.Node of the tasks it runs).
	Node  string
	Store Store
	// Limits bound the tasks; zero fields take their defaults.
	Limits Limits
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnChange, when set, is called with every record that changed on any
	// node (the status pushes); it must not block.
	OnChange func(Record)
}

// Errors of the service, besides ErrUnknown and ErrTooMany.
var (
	// ErrClosed refuses work once Close was called; a running task's
	// context ends with it as its cause.
	ErrClosed = errors.New("the task service is closed")
	// ErrCancelled is the cause of a cancelled task's context.
	ErrCancelled = errors.New("the task was cancelled")
	// ErrNotInTask refuses an ask made outside a running task.
	ErrNotInTask = errors.New("not inside a running task")
	// ErrNoPrincipal refuses a task to a caller that is nobody (an
	// unauthenticated request with no connection): its tasks would be
	// everyone's.
	ErrNoPrincipal = errors.New("a task needs a principal: send a bearer token")
)

// putTimeout bounds each write of a running task's state: it must not
// hang a handler's goroutine (or Close) on a store that went away.
const putTimeout = 10 * time.Second

// maxRounds bounds how often a multi round-trip handler may ask for input.
const maxRounds = 10

// NewService returns the service of one node's front, watching cfg.Store.
func NewService(cfg Config) *Service {
	s := &Service{node: cfg.Node, store: cfg.Store, limits: cfg.Limits.WithDefaults(), log: cfg.Logger, now: cfg.Now, change: cfg.OnChange,
		running: map[string]*run{}, waiters: map[string][]chan struct{}{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.unwatch = cfg.Store.Watch(s.onEvent)
	return s
}

// Limits are the limits the service applies, defaults filled in.
func (s *Service) Limits() Limits { return s.limits }

// Close stops the service: it stops watching, cancels every running task
// (their contexts end with ErrClosed) and waits for their goroutines.
func (s *Service) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	runs := make([]*run, 0, len(s.running))
	for _, r := range s.running {
		runs = append(runs, r)
	}
	for _, ws := range s.waiters {
		for _, w := range ws {
			close(w)
		}
	}
	s.waiters = map[string][]chan struct{}{}
	s.mu.Unlock()
	s.unwatch()
	for _, r := range runs {
		r.cancel(ErrClosed)
	}
	s.wg.Wait()
}

// Handler runs a task's work once. On the first run round is empty; a
// handler whose Outcome carried Input runs again with the responses to it.
type Handler func(ctx context.Context, round Round) Outcome

// Round is what a re-run of a multi round-trip handler is given.
type Round struct {
	// Responses are the input responses, keyed as the Input asked.
	Responses json.RawMessage
	// State is the requestState the previous run returned.
	State string
}

// Spec is what Start needs to know of a task.
type Spec struct {
	Principal, Tool string
	Form            Form
	// Conn is the creating connection of a Legacy task.
	Conn string
	// TTL is what the client asked for (0: none); ClampTTL applies.
	TTL time.Duration
	// Grace is how long Start waits for the handler before it creates a
	// task; 0 creates one at once.
	Grace time.Duration
	// Sync reports whether an outcome the handler produced within Grace
	// is answered directly rather than as a task; nil: never.
	Sync func(Outcome) bool
}

// Started is what Start produced: the outcome to answer directly (no task
// was created), or the task.
type Started struct {
	Outcome *Outcome
	Task    Record
}

// Start runs h as a task of spec.Principal. It waits up to spec.Grace for
// the handler: an outcome spec.Sync accepts is returned as it is and no
// task exists. Otherwise — the grace ran out, the handler asked its
// client something, or its outcome is not for a direct answer — the task
// is created in the Store (durable and replicated before Start returns)
// and the handler goes on running detached from ctx.
func (s *Service) Start(ctx context.Context, spec Spec, h Handler) (Started, error) {
	if spec.Principal == "" {
		return Started{}, ErrNoPrincipal
	}
	held := len(s.store.Of(spec.Principal))
	if held >= s.limits.PerPrincipal {
		return Started{}, fmt.Errorf("%w: %d tasks are held already, at most %d per principal (--task-per-principal)", ErrTooMany, held, s.limits.PerPrincipal)
	}
	now := s.now()
	rec := Record{ID: NewID(), Principal: spec.Principal, Node: s.node, Tool: spec.Tool, Form: spec.Form, Status: Working,
		Created: now, Updated: now, TTL: ClampTTL(spec.TTL, s.limits), PollInterval: s.limits.PollInterval}
	if spec.Form == Legacy {
		rec.Conn = spec.Conn
	}
	rctx, cancelTTL := context.WithDeadlineCause(context.WithoutCancel(ctx), rec.Created.Add(rec.TTL), errExpired)
	rctx, cancel := context.WithCancelCause(rctx)
	r := &run{id: rec.ID, tool: rec.Tool, svc: s, rec: rec, h: h, cancel: cancel, first: make(chan Outcome, 1), parks: make(chan struct{}, 1),
		created: make(chan struct{}), abandoned: make(chan struct{}), asks: map[string]*ask{}}
	r.ctx = context.WithValue(rctx, runKey{}, r)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel(ErrClosed)
		cancelTTL()
		return Started{}, ErrClosed
	}
	s.running[rec.ID] = r
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer cancelTTL()
		r.work()
	}()

	var grace <-chan time.Time
	if spec.Grace > 0 {
		t := time.NewTimer(spec.Grace)
		defer t.Stop()
		grace = t.C
	} else {
		grace = closedTime
	}
	var early *Outcome
	select {
	case out := <-r.first:
		if spec.Sync != nil && spec.Sync(out) {
			r.abandon()
			return Started{Outcome: &out}, nil
		}
		early = &out
	case <-grace:
	case <-r.parks:
	}
	if early != nil && early.Input == nil {
		rec = Settle(rec, *early, s.limits.MaxResultBytes, s.now())
	}
	// Held across Create: a request for the task (its id is known once it
	// is stored) acts on the record as created.
	r.mu.Lock()
	err := s.store.Create(ctx, rec)
	r.rec = rec
	r.mu.Unlock()
	if err != nil {
		r.abandon()
		return Started{}, fmt.Errorf("creating the task: %w", err)
	}
	close(r.created) // the goroutine settles or parks the outcome it has
	return Started{Task: rec}, nil
}

var errExpired = errors.New("the task's TTL ran out")

// closedTime is a channel that is always ready.
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// onEvent takes the Store's events: a request for a task running here is
// acted on (off the Store's goroutine: acting writes the record), and any
// change wakes the tasks/result calls waiting on that task.
func (s *Service) onEvent(ev Event) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for _, w := range s.waiters[ev.Task.ID] {
		close(w)
	}
	delete(s.waiters, ev.Task.ID)
	var r *run
	if ev.Request != nil {
		r = s.running[ev.Request.Task]
	}
	if r != nil {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if s.change != nil && ev.Request == nil && !ev.Gone {
		s.change(ev.Task)
	}
	if r == nil {
		return
	}
	req := *ev.Request
	go func() {
		defer s.wg.Done()
		if req.Cancel {
			r.cancelled()
			return
		}
		r.respond(decodeMap(req.Responses))
	}()
}

// Ask is a running task's handler asking its client (elicitation,
// sampling, roots): the task parks as input_required with the request
// under a key of its own in inputRequests, and Ask returns the response a
// tasks/update hands in for that key. Concurrent asks wait under distinct
// keys. ctx must be (derived from) the handler's context.
func (s *Service) Ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	r, _ := ctx.Value(runKey{}).(*run)
	if r == nil {
		return nil, fmt.Errorf("asking the client %s: %w", method, ErrNotInTask)
	}
	return r.ask(ctx, method, params)
}

// Progress records msg as the running task's status message (dropped
// outside a task; at most one write per poll interval, the rest are
// dropped too: progress is advice, every write is replicated).
func (s *Service) Progress(ctx context.Context, msg string) {
	if r, _ := ctx.Value(runKey{}).(*run); r != nil {
		r.progress(msg)
	}
}

// InTask reports whether ctx is a running task's handler context.
func InTask(ctx context.Context) bool {
	r, _ := ctx.Value(runKey{}).(*run)
	return r != nil
}

type runKey struct{}
