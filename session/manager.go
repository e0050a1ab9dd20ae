package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/watch"
	"github.com/sony/gobreaker/v2"
)

// ManagerConfig configures a Manager. Zero fields take the defaults noted.
type ManagerConfig struct {
	// Registry holds the apps; required.
	Registry *Registry
	// Startable names the apps clients may start. Nil means the registry's
	// DefaultStartable list; an empty non-nil slice makes nothing startable.
	// Every name must be registered.
	Startable []string
	// Store receives snapshots; nil keeps none.
	Store Store
	// MaxPerPrincipal caps the live sessions one principal holds on this
	// node; 0 means no cap of its own (MaxSessions still bounds the node).
	// The node sets it from the policy's limits.sessions_per_principal,
	// which the MCP front enforces across the swarm before a start reaches
	// here.
	MaxPerPrincipal int
	// MaxSessions caps live sessions on this node (default 10,000).
	MaxSessions int
	// CallTimeout bounds how long Call and SendKey wait for an update
	// (default 5 s); the update may still apply after it.
	CallTimeout time.Duration
	// Mailbox is each session's queue length (default 64); a full mailbox
	// answers ErrBusy at once.
	Mailbox int
	// BreakerFaults is how many consecutive faults open a tool's circuit
	// breaker (default 5).
	BreakerFaults int
	// BreakerTimeout is how long a breaker stays open before it lets one
	// call through (default 30 s).
	BreakerTimeout time.Duration
	// MaxStateBytes bounds one session's snapshot, encoded as it is saved
	// (model, info and tools as JSON) (default 256 KiB, DefaultMaxStateBytes).
	// An update that would exceed it is refused and the session keeps its
	// model; a Start, Adopt or Restore whose first state exceeds it is
	// refused. The node sets it from the policy's limits.session_state_bytes.
	MaxStateBytes int
	// MaxTextBytes bounds every string argument a client hands a widget
	// action (default 8 KiB, DefaultMaxTextBytes); a longer one is refused
	// with a tool error before the session sees it. The node sets it from
	// its widget-text-bytes setting.
	MaxTextBytes int
	// MaxCommands bounds the commands (WithCommand) one session runs at
	// once (default 4, DefaultMaxCommands): an update asking for one more
	// is refused and the session keeps its model. The node sets it from
	// its session-commands setting.
	MaxCommands int
	// CommandTimeout bounds how long a command runs before its context is
	// cancelled (default 10 minutes, DefaultCommandTimeout). CallTimeout
	// bounds only the update that starts it: the call then waits for the
	// command's message to be applied.
	CommandTimeout time.Duration
	// MaxTools caps each session's sticky tool set (default 4,096); tools
	// past it are not offered and a warning is logged once.
	MaxTools int
	// Logger receives warnings (refused tools, panics, store errors);
	// nil uses slog.Default().
	Logger *slog.Logger
}

// Manager owns the sessions running on this node. It is safe for concurrent
// use.
type Manager struct {
	cfg       ManagerConfig
	log       *slog.Logger
	startable map[string]bool

	mu       sync.RWMutex
	sessions map[string]*actor
	perPrin  map[string]int
	closed   bool

	subs watch.Set[Event]
	// workers run the sessions' queues (see workers).
	workers workers
	// reqs pools requests (*request) with their reply channel and timer.
	reqs sync.Pool
	// cmds counts the command goroutines, which Close waits for.
	cmds sync.WaitGroup
}

// NewManager validates cfg and returns a Manager with no sessions.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Registry == nil {
		return nil, errors.New("creating session manager: registry is required")
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 10000
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 5 * time.Second
	}
	if cfg.Mailbox == 0 {
		cfg.Mailbox = 64
	}
	if cfg.MaxTools == 0 {
		cfg.MaxTools = 4096
	}
	if cfg.MaxTextBytes == 0 {
		cfg.MaxTextBytes = DefaultMaxTextBytes
	}
	if cfg.MaxStateBytes == 0 {
		cfg.MaxStateBytes = DefaultMaxStateBytes
	}
	if cfg.MaxCommands == 0 {
		cfg.MaxCommands = DefaultMaxCommands
	}
	if cfg.CommandTimeout == 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.BreakerFaults == 0 {
		cfg.BreakerFaults = 5
	}
	if cfg.BreakerTimeout == 0 {
		cfg.BreakerTimeout = 30 * time.Second
	}
	if cfg.MaxPerPrincipal < 0 || cfg.MaxSessions < 0 || cfg.CallTimeout < 0 || cfg.Mailbox < 0 || cfg.BreakerFaults < 0 || cfg.BreakerTimeout < 0 || cfg.MaxTools < 0 || cfg.MaxStateBytes < 0 || cfg.MaxTextBytes < 0 || cfg.MaxCommands < 0 || cfg.CommandTimeout < 0 {
		return nil, errors.New("creating session manager: limits, timeouts and sizes must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	names := cfg.Startable
	if names == nil {
		names = cfg.Registry.DefaultStartable()
	}
	startable := make(map[string]bool, len(names))
	for _, n := range names {
		if _, ok := cfg.Registry.Lookup(n); !ok {
			return nil, fmt.Errorf("creating session manager: startable app %q is not registered", n)
		}
		startable[n] = true
	}
	return &Manager{
		cfg: cfg, log: cfg.Logger, startable: startable,
		sessions: map[string]*actor{}, perPrin: map[string]int{},
		workers: workers{linger: workerLinger, maxIdle: workersIdle},
	}, nil
}

// A worker parks this long for the next queue before it exits, and this
// many park at most: enough for every client of a loaded node to find a
// grown stack, few enough that idle workers are noise (a worker's stack is
// a few KB; 64 of them are less than 300 idle sessions' goroutines were).
const (
	workerLinger = 250 * time.Millisecond
	workersIdle  = 64
)

// Startable lists the apps clients may start, sorted by name.
func (m *Manager) Startable() []AppInfo {
	out := make([]AppInfo, 0, len(m.startable))
	for n := range m.startable {
		if info, ok := m.cfg.Registry.Info(n); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b AppInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Start starts app as session id for principal. An empty id is generated.
// An app outside the startable list is refused (ErrNotStartable) before any
// registry lookup; an invalid id answers ErrInvalidID, a running one
// ErrExists, a full cap ErrLimit.
func (m *Manager) Start(ctx context.Context, id, app, principal string) (Info, error) {
	if !m.startable[app] {
		return Info{}, fmt.Errorf("starting session: app %q: %w", Sanitize(app), ErrNotStartable)
	}
	return m.start(ctx, id, app, principal, nil, true)
}

func (m *Manager) start(ctx context.Context, id, app, principal string, snap *Snapshot, save bool) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("starting session: %w", err)
	}
	if id == "" {
		id = newID()
	}
	if !ValidID(id) {
		return Info{}, fmt.Errorf("starting session %q: %w", Sanitize(id), ErrInvalidID)
	}
	factory, ok := m.cfg.Registry.Lookup(app)
	if !ok {
		return Info{}, fmt.Errorf("starting session %s: app %q is not registered: %w", id, app, ErrNotStartable)
	}
	if err := m.admit(id, principal); err != nil {
		return Info{}, err
	}
	a, err := m.newActor(ctx, id, app, principal, factory, snap)
	if err != nil {
		return Info{}, fmt.Errorf("starting session %s: %w", id, err)
	}
	m.mu.Lock()
	if err := m.admitLocked(id, principal); err != nil {
		m.mu.Unlock()
		return Info{}, err
	}
	m.sessions[id] = a
	m.perPrin[principal]++
	m.mu.Unlock()
	// Saved before the actor runs (so no later update's snapshot is
	// overwritten) and before Start or Adopt answers, so a started or
	// handed-over session survives a crash as its caller was told.
	// Restore skips it: the snapshot is what it was loaded from.
	if save {
		if err := m.persist(a.snapshot()); err != nil {
			m.mu.Lock()
			if m.sessions[id] == a { // unless a Stop took it out meanwhile
				delete(m.sessions, id)
				if m.perPrin[principal]--; m.perPrin[principal] == 0 {
					delete(m.perPrin, principal)
				}
			}
			m.mu.Unlock()
			close(a.done) // the actor never ran: release anyone stopping or calling it
			return Info{}, fmt.Errorf("starting session %s: %w", id, err)
		}
	}
	a.begin()
	m.emit(Event{Kind: Started, Session: id, Principal: principal},
		Event{Kind: ToolsChanged, Session: id, Principal: principal})
	return a.info, nil
}

// admit checks the caps and uniqueness before the app's Init runs; the
// check is repeated under the lock when the session is inserted.
func (m *Manager) admit(id, principal string) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.admitLocked(id, principal)
}

func (m *Manager) admitLocked(id, principal string) error {
	switch {
	case m.closed:
		return fmt.Errorf("starting session %s: %w", id, ErrClosed)
	case m.sessions[id] != nil:
		return fmt.Errorf("starting session %s: %w", id, ErrExists)
	case len(m.sessions) >= m.cfg.MaxSessions:
		return fmt.Errorf("starting session %s: node runs %d sessions, its cap: %w", id, m.cfg.MaxSessions, ErrLimit)
	case m.cfg.MaxPerPrincipal > 0 && m.perPrin[principal] >= m.cfg.MaxPerPrincipal:
		return fmt.Errorf("starting session %s: principal runs %d sessions, its cap: %w", id, m.cfg.MaxPerPrincipal, ErrLimit)
	}
	return nil
}

func (m *Manager) newActor(ctx context.Context, id, app, principal string, factory func() App, snap *Snapshot) (a *actor, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("initialising app %s: panic: %v", app, p)
		}
	}()
	impl := factory()
	if impl == nil {
		return nil, fmt.Errorf("app %s factory returned nil", app)
	}
	a = &actor{
		info: Info{ID: id, App: app, Principal: principal, Created: time.Now().UTC(), Status: "running"},
		app:  impl, projs: projections(impl), mgr: m,
		done: make(chan struct{}), draining: true, // begin lets calls run
		tools: newSticky(id, m.cfg.MaxTools), warned: map[string]bool{},
	}
	var model Model
	if snap != nil {
		a.info.Created = snap.Info.Created
		a.info.Handoff = snap.Info.Handoff
		if model, err = decodeModel(impl, snap.Model); err != nil {
			return nil, err
		}
		for _, t := range snap.Tools {
			if t.Session == id && strings.HasPrefix(t.Name, id+".") {
				a.tools.add([]Tool{t})
			}
		}
	} else if model, err = initModel(ctx, impl); err != nil {
		return nil, fmt.Errorf("initialising app %s: %w", app, err)
	} else if _, ok := model.(withCommand); ok {
		return nil, fmt.Errorf("initialising app %s: Init returned a command; start commands from Update", app)
	}
	r, err := a.render(model)
	if err != nil {
		return nil, err
	}
	st := a.prepare(r, false)
	if err := a.sizer.check(st.snap, st.tools, m.cfg.MaxStateBytes); err != nil {
		return nil, err
	}
	a.publish(st)
	return a, nil
}

// initModel is the first model of a session app starts: InitContext when
// the app has it, else Init.
func initModel(ctx context.Context, app App) (Model, error) {
	if ci, ok := app.(ContextIniter); ok {
		return ci.InitContext(ctx)
	}
	return app.Init()
}

// Stop stops session id and deletes its snapshot.
func (m *Manager) Stop(ctx context.Context, id string) error {
	_, err := m.stop(ctx, id)
	return err
}

// Detach stops session id and returns its final snapshot, taken after its
// last update, so the caller can start it on another node with Adopt.
// Unlike Stop it keeps the stored snapshot: a crash before the other node
// has saved the session loses nothing. Call Release once the session is
// adopted elsewhere, or Adopt to run it here again.
func (m *Manager) Detach(ctx context.Context, id string) (Snapshot, error) {
	a, err := m.stopKeeping(ctx, id, true)
	if err != nil {
		return Snapshot{}, err
	}
	return a.snapshot(), nil
}

// Release deletes the stored snapshot of a session Detach stopped, once
// another node has adopted it; a session running here under that id (one
// adopted back) keeps its snapshot.
func (m *Manager) Release(id string) error {
	if m.actor(id) != nil || m.cfg.Store == nil {
		return nil
	}
	if err := m.cfg.Store.Delete(id); err != nil {
		return fmt.Errorf("releasing the snapshot of session %s: %w", Sanitize(id), err)
	}
	return nil
}

// Adopt starts a session from a snapshot another node detached, keeping
// its id, app, principal, creation time, model and sticky tools. The caps
// apply; the startable list does not (the session was started already).
func (m *Manager) Adopt(ctx context.Context, snap Snapshot) (Info, error) {
	return m.start(ctx, snap.Info.ID, snap.Info.App, snap.Info.Principal, &snap, true)
}

func (m *Manager) stop(ctx context.Context, id string) (*actor, error) {
	return m.stopKeeping(ctx, id, false)
}

// stopKeeping stops session id after its last update; unless keep, the
// actor deletes its stored snapshot on the way out.
func (m *Manager) stopKeeping(ctx context.Context, id string, keep bool) (*actor, error) {
	m.mu.Lock()
	a := m.sessions[id]
	if a == nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("stopping session %s: %w", Sanitize(id), ErrNotRunning)
	}
	delete(m.sessions, id)
	if m.perPrin[a.info.Principal]--; m.perPrin[a.info.Principal] == 0 {
		delete(m.perPrin, a.info.Principal)
	}
	m.mu.Unlock()
	a.stop(keep)
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("stopping session %s: waiting for its last update: %w", id, ctx.Err())
	}
	m.emit(Event{Kind: Stopped, Session: id, Principal: a.info.Principal})
	return a, nil
}

// Get returns the info of a running session.
func (m *Manager) Get(id string) (Info, bool) {
	a := m.actor(id)
	if a == nil {
		return Info{}, false
	}
	return a.info, true
}

// List returns every running session, sorted by id.
func (m *Manager) List() []Info {
	m.mu.RLock()
	out := make([]Info, 0, len(m.sessions))
	for _, a := range m.sessions {
		out = append(out, a.info)
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (m *Manager) actor(id string) *actor {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.sessions[id]
}

func (m *Manager) running(id string) (*actor, error) {
	if a := m.actor(id); a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("session `%s`: %w", Sanitize(id), ErrNotRunning)
}

// Tools returns the session's sticky tool set, discover_tools first. The
// slice is the published set itself, shared with the session and never
// written again (a change publishes a new set: sticky.with): callers must
// not modify it. The swarm keeps it in its index for the session's life,
// so a copy here cost every idle session its tool list twice.
func (m *Manager) Tools(id string) ([]Tool, error) {
	a, err := m.running(id)
	if err != nil {
		return nil, err
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.tools.tools, nil
}

// Call runs a derived tool (its full name) with args and answers once the
// session has handled it: a read from the current view, a write after
// Update has run. A write whose update starts a command (WithCommand)
// answers once the command's message has been applied, with that update's
// result; meanwhile the session serves other calls. Tool-level failures
// are a Result with IsError; the error return is ErrNotRunning,
// ErrCommandLost (the session stopped or moved while the call's command
// ran: the update that started it was applied), ErrBusy,
// ErrTimeout (the update may still apply), ErrCircuitOpen or the
// context's error.
func (m *Manager) Call(ctx context.Context, id, tool string, args map[string]any) (Result, error) {
	a, err := m.running(id)
	if err != nil {
		return Result{}, fmt.Errorf("calling %s: %w", Sanitize(tool), err)
	}
	if !a.hasTool(tool) {
		// Unknown names get no breaker, so callers cannot grow the session's state.
		return errorResult(fmt.Errorf("session `%s` has no tool `%s`", id, Sanitize(tool))), nil
	}
	if err := checkTextArgs(args, m.cfg.MaxTextBytes); err != nil {
		// Refused before the session sees it: the model keeps its value
		// and the breaker does not count a client's oversized input.
		return errorResult(fmt.Errorf("calling %s: %w", Sanitize(tool), err)), nil
	}
	done, err := a.breaker(tool).Allow()
	if err != nil {
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			return Result{}, fmt.Errorf("calling %s: tool failed repeatedly, retry later: %w", tool, ErrCircuitOpen)
		}
		return Result{}, fmt.Errorf("calling %s: %w", tool, err)
	}
	r := m.newRequest(ctx)
	r.tool, r.args = tool, args
	res, fault, err := m.send(ctx, a, r)
	switch {
	case fault: // the update failed, panicked or timed out
		done(errFault)
	case err != nil || res.IsError: // busy, cancelled, widget gone, bad arguments: neither fault nor success
		done(errNotCounted)
	default:
		done(nil)
	}
	if err != nil {
		return Result{}, fmt.Errorf("calling %s: %w", Sanitize(tool), err)
	}
	return res, nil
}

// SendKey delivers k to the session's Update as a KeyPress message, with
// the focused widget (see Focus).
func (m *Manager) SendKey(ctx context.Context, id string, k Key) (Result, error) {
	a, err := m.running(id)
	if err != nil {
		return Result{}, fmt.Errorf("sending key: %w", err)
	}
	r := m.newRequest(ctx)
	r.key = &k
	res, _, err := m.send(ctx, a, r)
	if err != nil {
		return Result{}, fmt.Errorf("sending key to %s: %w", id, err)
	}
	if !res.IsError {
		res.Text = "key delivered"
	}
	return res, nil
}

// newRequest returns a request for ctx from the pool: its reply channel
// and timer are reused (they were three allocations of every call).
func (m *Manager) newRequest(ctx context.Context) *request {
	r, _ := m.reqs.Get().(*request)
	if r == nil {
		r = &request{reply: make(chan reply, 1), timer: time.NewTimer(time.Hour)}
		r.timer.Stop()
	}
	r.ctx = ctx
	return r
}

// send queues r without blocking and waits for its answer. r goes back to
// the pool only once its answer was read: a caller that gave up leaves it
// to the session, which may still answer into its channel.
func (m *Manager) send(ctx context.Context, a *actor, r *request) (Result, bool, error) {
	if err := a.enqueue(r); err != nil {
		m.recycle(r)
		return Result{}, false, err
	}
	r.timer.Reset(m.cfg.CallTimeout)
	select {
	case rep := <-r.reply:
		r.timer.Stop()
		m.recycle(r)
		if rep.cmd != nil {
			return m.awaitCommand(ctx, a, rep.cmd)
		}
		return rep.res, rep.fault, rep.err
	case <-r.timer.C:
		return Result{}, true, fmt.Errorf("no answer within %s; the update may still apply, check the session's state before retrying: %w", m.cfg.CallTimeout, ErrTimeout)
	case <-ctx.Done():
		r.timer.Stop()
		return Result{}, false, fmt.Errorf("call cancelled; the update may still apply: %w", ctx.Err())
	case <-a.done:
		r.timer.Stop()
		select {
		case rep := <-r.reply: // answered just before the session stopped
			if rep.cmd != nil {
				return m.awaitCommand(ctx, a, rep.cmd)
			}
			return rep.res, rep.fault, rep.err
		default:
			return Result{}, false, fmt.Errorf("session `%s` stopped: %w", a.info.ID, ErrNotRunning)
		}
	}
}

// recycle returns an answered request to the pool. Its timer is stopped
// (a stopped timer's channel holds nothing since Go 1.23) and its reply
// channel empty.
func (m *Manager) recycle(r *request) {
	r.ctx, r.tool, r.args, r.key, r.msg, r.what = nil, "", nil, nil, nil, ""
	m.reqs.Put(r)
}

// Model returns the session's model as JSON.
func (m *Manager) Model(id string) (json.RawMessage, error) {
	a, err := m.running(id)
	if err != nil {
		return nil, fmt.Errorf("reading model: %w", err)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.modelJSON), nil
}

// Close stops every session, keeping their snapshots for Restore, and
// refuses new ones. It cancels their commands and waits for them to return.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	all := make([]*actor, 0, len(m.sessions))
	for _, a := range m.sessions {
		all = append(all, a)
	}
	m.sessions = map[string]*actor{}
	m.perPrin = map[string]int{}
	m.mu.Unlock()
	for _, a := range all {
		a.stop(true)
	}
	defer m.workers.close() // after the last drain: a parked worker would outlive the manager
	for _, a := range all {
		select {
		case <-a.done:
			m.emit(Event{Kind: Stopped, Session: a.info.ID, Principal: a.info.Principal})
		case <-ctx.Done():
			return fmt.Errorf("closing session manager: %w", ctx.Err())
		}
	}
	if err := m.waitCommands(ctx); err != nil {
		return fmt.Errorf("closing session manager: %w", err)
	}
	return nil
}

// Restore starts every session in the Store from its snapshot, skipping
// (and reporting) those it cannot start. The startable list does not apply:
// snapshots are this node's own.
func (m *Manager) Restore(ctx context.Context) error {
	if m.cfg.Store == nil {
		return nil
	}
	snaps, err := m.cfg.Store.Load()
	if err != nil {
		return fmt.Errorf("restoring sessions: %w", err)
	}
	var errs []error
	for _, s := range snaps {
		if _, err := m.start(ctx, s.Info.ID, s.Info.App, s.Info.Principal, &s, false); err != nil {
			// Logged here, per session, so a refused snapshot (one over
			// MaxStateBytes, say) is named even if the caller only counts
			// failures; its stored copy is left alone for the operator.
			m.log.Error("session not restored", "session", Sanitize(s.Info.ID), "err", err)
			errs = append(errs, fmt.Errorf("restoring session %s: %w", Sanitize(s.Info.ID), err))
		}
	}
	return errors.Join(errs...)
}

// Subscribe registers fn for every event until cancel is called. fn is
// called from session goroutines and must not block.
func (m *Manager) Subscribe(fn func(Event)) (cancel func()) { return m.subs.Add(fn) }

func (m *Manager) hasSubscribers() bool { return m.subs.Len() > 0 }

func (m *Manager) emit(evs ...Event) { m.subs.Notify(evs...) }

// persist saves snap in the Store; when it returns nil the snapshot is as
// durable as the Store promises.
func (m *Manager) persist(snap Snapshot) error {
	if m.cfg.Store == nil {
		return nil
	}
	if err := m.cfg.Store.Save(snap); err != nil {
		m.log.Error("saving session snapshot", "session", snap.Info.ID, "err", err)
		return fmt.Errorf("saving session %s: %w", snap.Info.ID, err)
	}
	return nil
}

func (m *Manager) deleteSnapshot(id string) {
	if m.cfg.Store == nil {
		return
	}
	if err := m.cfg.Store.Delete(id); err != nil {
		m.log.Warn("deleting session snapshot", "session", id, "err", err)
	}
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "s" + hex.EncodeToString(b[:])
}
