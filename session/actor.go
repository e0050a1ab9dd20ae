package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"gomodules.xyz/jsonpatch/v2"
)

// request is one message to a session's actor; reply is buffered so the
// actor never blocks on a caller that gave up. Requests are pooled with
// their channel and timer (Manager.newRequest).
type request struct {
	ctx  context.Context
	tool string
	args map[string]any
	key  *Key
	// msg is a command's message to apply (a completion, see
	// runCommand); what labels the call that started the command.
	msg   Msg
	what  string
	reply chan reply
	timer *time.Timer // bounds the caller's wait (CallTimeout)
}

type reply struct {
	res Result
	err error // the session stopped before handling the request
	// fault marks an outcome that counts against the tool's circuit breaker.
	fault bool
	// cmd is the command the update started: the call's answer is the
	// one it delivers.
	cmd *running
}

// rendered is everything derived from one model.
type rendered struct {
	model     Model
	modelJSON json.RawMessage
	view      Node
	derived   Derivation
	resources map[string]json.RawMessage // widgets, model/<key>; context is added at commit
}

// actor is a running session: one goroutine applies its messages in order.
type actor struct {
	info  Info
	app   App
	projs []Projection
	mgr   *Manager
	// done is closed once the session has stopped: its last update is
	// saved and published and every call left waiting has been answered.
	done chan struct{}

	// The queue of calls, run by a goroutine that exists only while there
	// is work (drain): an idle session holds no goroutine, stack or
	// channel buffer. qmu guards queue, draining and stopping.
	qmu   sync.Mutex
	queue []*request // waiting calls, at most mgr.cfg.Mailbox
	// draining is set while a goroutine runs the queue, and from
	// newActor until begin, so nothing runs before the first save.
	draining bool
	stopping bool // Stop or Close asked: no new calls; the queue is refused
	// cmds are the commands in flight (at most mgr.cfg.MaxCommands).
	cmds map[*running]struct{}

	mu        sync.RWMutex // guards the published state below
	model     Model
	modelJSON json.RawMessage
	view      Node
	tools     *sticky
	resources map[string]json.RawMessage
	focus     string          // the widget the last successful write went to
	infoDoc   json.RawMessage // the session part of the context resource
	derived   Derivation      // the last render's derivation; actor goroutine only
	parts     *snapshotParts  // info and tools encoded for snapshots; actor goroutine only

	bmu      sync.Mutex
	breakers map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]

	warned map[string]bool // actor goroutine only (and start, before it runs)
	sizer  stateSizer      // actor goroutine only (and start, before it runs)
	// deleteOnExit is set before quit is closed by Stop: the actor deletes
	// its snapshot after its last update, so no late save resurrects it.
	deleteOnExit bool
}

// render computes the view, tools and resources of m, recovering panics in
// the app's View and projections.
func (a *actor) render(m Model) (r rendered, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rendering view: panic: %v", p)
		}
	}()
	r.model = m
	if r.modelJSON, err = json.Marshal(m); err != nil {
		return r, fmt.Errorf("encoding model: %w", err)
	}
	r.view = a.app.View(m)
	r.derived = Rederive(a.info.ID, r.view, a.derived)
	if r.resources, err = project(a.projs, m); err != nil {
		return r, err
	}
	w, err := widgetsDoc(r.view, len(a.resources[ResourceWidgets])) // a.resources: written on this goroutine only
	if err != nil {
		return r, fmt.Errorf("encoding widgets: %w", err)
	}
	if cap(w) > max(len(w)+len(w)/4, 256) {
		// Kept until the next render (an idle session's for its life): a
		// first render's buffer grew from its guess, up to twice the size.
		w = bytes.Clone(w)
	}
	r.resources[ResourceWidgets] = w
	return r, nil
}

// step is what one applied update asks of the runtime, in the order the
// runtime must run it: save the snapshot durably, then publish the new
// state and answer the caller, then announce the events. Nothing of it is
// visible to readers or peers until the save has returned.
type step struct {
	r       rendered
	tools   *sticky // the sticky set after r: the current one when r adds nothing
	changed bool    // the tool set changed
	snap    Snapshot
}

// prepare computes the step for r without publishing anything. Actor
// goroutine only (and newActor, before it runs). encode keeps the info
// and tools encoded for the snapshots of later updates (snapshotParts);
// newActor does not ask for it, so a session never written holds no
// encoded copy of its tools (about 1 KB for a counter).
func (a *actor) prepare(r rendered, encode bool) step {
	for _, w := range r.derived.Warnings {
		a.warnOnce(w.String(), "deriving tools", "widget", w.Widget, "action", w.Action, "reason", w.Reason)
	}
	a.derived = r.derived
	tools, changed, refused := a.tools.with(r.derived.Tools)
	if refused > 0 {
		a.warnOnce("tool limit", "session reached its tool limit; new tools are not offered",
			"limit", a.mgr.cfg.MaxTools, "refused", refused)
	}
	if a.infoDoc == nil {
		a.infoDoc = sessionDoc(a.info)
	}
	// The context resource is assembled when read (contextResource), not
	// on every update: nobody may read it, and whether it changed follows
	// from its parts (changes).
	snap := Snapshot{Info: a.info, Model: r.modelJSON, Tools: tools.tools}
	if encode && (a.parts == nil || a.parts.set != tools) {
		a.parts, _ = encodeParts(a.info, tools) // on an error (never for these types) snapshots encode in full
	}
	if a.parts != nil {
		snap.enc = a.parts
	}
	return step{r: r, tools: tools, changed: changed, snap: snap}
}

// with returns the set after adding tools, as add would, without changing
// s: s itself when nothing changes, otherwise a copy. Snapshots and
// readers hold s's slice, so it is never written after it is published.
func (s *sticky) with(tools []Tool) (next *sticky, changed bool, refused int) {
	full := s.limit > 0 && len(s.tools) >= s.limit
	for _, t := range tools {
		i, ok := s.find(t.Name)
		if (ok && !s.tools[i].Equal(t)) || (!ok && !full) {
			changed = true
			break
		}
		if !ok {
			refused++
		}
	}
	if !changed {
		return s, false, refused
	}
	next = &sticky{tools: slices.Clone(s.tools), limit: s.limit}
	if s.index != nil {
		next.index = maps.Clone(s.index)
	}
	changed, refused = next.add(tools)
	return next, changed, refused
}

// publish installs st as the session's state and returns the events it
// causes.
func (a *actor) publish(st step) []Event {
	a.mu.Lock()
	old, oldTools := a.resources, a.tools
	r := st.r
	a.tools = st.tools
	a.model, a.modelJSON, a.view, a.resources = r.model, r.modelJSON, r.view, r.resources
	a.mu.Unlock()
	var prevTools []Tool
	if oldTools != nil {
		prevTools = oldTools.tools
	}
	return changes(a.info, old, r.resources, prevTools, st.tools.tools, st.changed, a.mgr.hasSubscribers())
}

// contextResource assembles the context resource from the published
// state. Callers hold a.mu.
func (a *actor) contextResource() json.RawMessage {
	return contextDoc(a.infoDoc, a.resources, a.resources[ResourceWidgets], a.tools.tools)
}

// changes lists the events of a session going from the resources old to
// cur (widgets and model/<key>) and the tools oldTools to curTools:
// ToolsChanged when its tool set changed and, when anyone listens and this
// is not the first render, one ResourceChanged per changed resource in
// name order, with a lazily computed JSON patch for model resources. The
// context resource, assembled from the session's fixed info, the other
// resources and the tool names, changed exactly when one of those did. It
// is pure.
func changes(info Info, old, cur map[string]json.RawMessage, oldTools, curTools []Tool, toolsChanged, listened bool) []Event {
	var evs []Event
	if toolsChanged {
		evs = []Event{{Kind: ToolsChanged, Session: info.ID, Principal: info.Principal}}
	}
	if old == nil || !listened {
		return evs
	}
	contextChanged := !sameNames(oldTools, curTools)
	// Sized for every resource and the context, so neither list grows
	// while it fills (growing them was most of what a click's events
	// allocated).
	changed := make([]string, 0, len(cur)+1)
	for name, now := range cur {
		if prev, ok := old[name]; !ok || string(prev) != string(now) {
			changed = append(changed, name)
			contextChanged = true
		}
	}
	if contextChanged {
		changed = append(changed, ResourceContext)
	}
	if len(changed) == 0 {
		return evs
	}
	slices.Sort(changed)
	evs = append(make([]Event, 0, len(evs)+len(changed)), evs...)
	for _, name := range changed {
		ev := Event{Kind: ResourceChanged, Session: info.ID, Principal: info.Principal, Resource: name}
		if strings.HasPrefix(name, "model/") { // widgets and context change with every render: no patch
			prev, ok := old[name]
			if !ok {
				prev = []byte("null")
			}
			ev.Patch = lazyPatch(prev, cur[name])
		}
		evs = append(evs, ev)
	}
	return evs
}

// lazyPatch returns the RFC 6902 patch from prev to now, computed on the
// first call (only a notification to a subscriber needs it; computing it
// on every update was 8% of a click's bytes) and remembered. Both
// documents are published and never written, so holding them is safe.
func lazyPatch(prev, now json.RawMessage) func() json.RawMessage {
	return sync.OnceValue(func() json.RawMessage {
		ops, err := jsonpatch.CreatePatch(prev, now)
		if err != nil {
			return nil
		}
		b, _ := json.Marshal(ops) // operations of decoded JSON always encode
		return b
	})
}

// sameNames reports whether two tool lists name the same tools in the
// same order (the context resource lists names only).
func sameNames(a, b []Tool) bool {
	return slices.EqualFunc(a, b, func(x, y Tool) bool { return x.Name == y.Name })
}

// maxWarned bounds how many distinct warnings a session remembers.
const maxWarned = 256

// warnOnce logs msg once per key for the session's lifetime, and stops
// logging new keys after maxWarned of them.
func (a *actor) warnOnce(key, msg string, attrs ...any) {
	if a.warned[key] || len(a.warned) > maxWarned {
		return
	}
	a.warned[key] = true
	if len(a.warned) > maxWarned {
		a.mgr.log.Warn("session logs no further warnings", "session", a.info.ID)
		return
	}
	a.mgr.log.Warn(msg, append([]any{"session", a.info.ID}, attrs...)...)
}

// enqueue queues r, starting a goroutine to run the queue when none does.
// It never blocks: a full queue is ErrBusy, a stopping session
// ErrNotRunning.
func (a *actor) enqueue(r *request) error {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	switch {
	case a.stopping:
		return fmt.Errorf("session `%s`: %w", a.info.ID, ErrNotRunning)
	case len(a.queue) >= a.mgr.cfg.Mailbox:
		return fmt.Errorf("session `%s` has %d calls waiting: %w", a.info.ID, a.mgr.cfg.Mailbox, ErrBusy)
	}
	a.queue = append(a.queue, r)
	if !a.draining {
		a.draining = true
		a.mgr.workers.run(a)
	}
	return nil
}

// begin lets calls run once the session's first state is saved: calls
// queued since it was listed start a goroutine now.
func (a *actor) begin() {
	a.qmu.Lock()
	if a.stopping || len(a.queue) > 0 {
		a.qmu.Unlock()
		a.mgr.workers.run(a)
		return
	}
	a.draining = false
	a.qmu.Unlock()
}

// stop stops the session after the call it is running, if any, and
// deletes its snapshot on the way out unless keep. done is closed once it
// has stopped.
func (a *actor) stop(keep bool) {
	a.qmu.Lock()
	a.stopping = true
	a.deleteOnExit = !keep
	a.cancelCommands()
	if a.draining { // the goroutine running the queue finishes the stop
		a.qmu.Unlock()
		return
	}
	waiting := a.queue
	a.queue = nil
	a.qmu.Unlock()
	a.exit(waiting)
}

// exit answers the calls left waiting, deletes the snapshot when Stop
// asked, and marks the session stopped. It runs once, after the last
// update.
func (a *actor) exit(waiting []*request) {
	for _, r := range waiting {
		if r.msg != nil {
			r.reply <- reply{err: a.lostCommand(r.what)}
			continue
		}
		r.reply <- reply{err: fmt.Errorf("session `%s` stopped: %w", a.info.ID, ErrNotRunning)}
	}
	if a.deleteOnExit {
		a.mgr.deleteSnapshot(a.info.ID)
	}
	close(a.done)
}

// drain runs the queued calls in order, one at a time, and returns when
// the queue is empty; a stop wins over queued work. One drain runs at a
// time (draining), on a worker (workers.run).
func (a *actor) drain() {
	for {
		a.qmu.Lock()
		if a.stopping {
			waiting := a.queue
			a.queue, a.draining = nil, false
			a.qmu.Unlock()
			a.exit(waiting)
			return
		}
		if len(a.queue) == 0 {
			a.queue, a.draining = nil, false // an idle session keeps no queue array
			a.qmu.Unlock()
			return
		}
		r := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.qmu.Unlock()
		rep, evs := a.handle(r)
		// A changed tool set is announced before the answer, the rest
		// after it: the node's tool index learns the set from the
		// announcement, and the caller's next call may be a tool this
		// call just made (type into a form, then press the button it
		// enabled). Resource changes need not wait: reads go to the
		// session itself.
		n := toolEvents(evs)
		a.mgr.emit(evs[:n]...)
		r.reply <- rep // its state is saved
		a.mgr.emit(evs[n:]...)
	}
}

// toolEvents returns how many of evs, from the front, are ToolsChanged
// events (changes puts them first).
func toolEvents(evs []Event) int {
	n := 0
	for n < len(evs) && evs[n].Kind == ToolsChanged {
		n++
	}
	return n
}

// waiting returns how many calls are queued (tests).
func (a *actor) waiting() int {
	a.qmu.Lock()
	defer a.qmu.Unlock()
	return len(a.queue)
}

// handle runs r and returns its answer and the events to announce after it.
func (a *actor) handle(r *request) (rep reply, evs []Event) {
	defer func() {
		if p := recover(); p != nil { // a custom widget's Actions or Perform
			a.mgr.log.Error("widget panicked", "session", a.info.ID, "tool", r.tool, "panic", fmt.Sprint(p))
			rep, evs = reply{res: errorResult(fmt.Errorf("%s: widget panicked: %v", r.tool, p)), fault: true}, nil
		}
	}()
	if r.msg != nil {
		// A command's message is applied even when its call gave up: the
		// app learns how the work it started ended.
		rep, evs = a.apply(r.ctx, r.msg, r.what, "", true)
		if !rep.res.IsError && rep.cmd == nil {
			rep.res.Text = r.what + ": its command finished and its message was applied"
		}
		return rep, evs
	}
	if err := r.ctx.Err(); err != nil {
		return reply{res: errorResult(fmt.Errorf("call abandoned before it ran: %w", err))}, nil
	}
	if r.key != nil {
		return a.apply(r.ctx, KeyPress{Key: *r.key, Focus: a.focus}, "key", "", false)
	}
	t, ok := a.tools.get(r.tool) // only this goroutine writes tools
	if !ok {
		return reply{res: errorResult(fmt.Errorf("session `%s` has no tool `%s`", a.info.ID, r.tool))}, nil
	}
	if t.Action == "discover_tools" && t.Widget == "" {
		return reply{res: discoverResult(a.tools.tools, r.args)}, nil
	}
	out, err := Invoke(a.view, t, r.args)
	if err != nil {
		return reply{res: errorResult(err)}, nil
	}
	if !t.Sensitive {
		return reply{res: valueResult(out.Value)}, nil
	}
	rep, evs = a.apply(r.ctx, out.Msg, t.Action, t.Widget, false)
	if !rep.res.IsError {
		rep.res.Text = fmt.Sprintf("%s applied to widget `%s`", t.Action, t.Widget)
		a.mu.Lock()
		a.focus = t.Widget
		a.mu.Unlock()
	}
	return rep, evs
}

// apply runs Update with msg and re-renders, then runs the step's effects
// in order: the new snapshot is checked against MaxStateBytes and saved as durably as the Store promises,
// and only then is the state published and the call answered; the events
// it returns are announced after the answer. An error or panic in the app,
// or a failed save, leaves the session's model unchanged. A command the
// update asks for (WithCommand) starts once its state is published, and
// the reply carries it; past the session's bound the update is refused,
// model unchanged. widget names the widget of a tool call ("" for a key or
// a completion). completion marks a command's message, whose update runs
// even when its call gave up.
func (a *actor) apply(ctx context.Context, msg Msg, what, widget string, completion bool) (reply, []Event) {
	uctx := ctx
	if completion {
		uctx = context.WithoutCancel(ctx)
	}
	m, cmd, err := a.update(uctx, msg)
	if err != nil {
		return reply{res: errorResult(fmt.Errorf("%s: %w", what, err)), fault: true}, nil
	}
	var label string // names the call in its command's messages
	if cmd != nil {
		// Built only here: a plain call does not pay for it.
		label = what
		if widget != "" {
			label = what + " on widget `" + widget + "`"
		}
		if err := a.roomForCommand(label); err != nil {
			return reply{res: errorResult(err)}, nil
		}
	}
	r, err := a.render(m)
	if err != nil {
		return reply{res: errorResult(fmt.Errorf("%s: %w", what, err)), fault: true}, nil
	}
	st := a.prepare(r, true)
	// Bounded here, before the save: a refused state is neither saved nor
	// published, so the session keeps its previous model.
	if err := a.sizer.check(st.snap, st.tools, a.mgr.cfg.MaxStateBytes); err != nil {
		return reply{res: errorResult(fmt.Errorf("%s: session %s: update refused: %w", what, a.info.ID, err))}, nil
	}
	if err := a.mgr.persist(st.snap); err != nil {
		// The store may hold the refused state all the same: a replicating
		// store writes the owner's journal before a standby refuses.
		// Saving the state the session keeps puts it back, so a restart
		// cannot bring back an update the caller was told failed; when
		// that save fails too, the update may be held somewhere.
		// A save the standbys refused is not the tool's fault: it must
		// not open the tool's breaker (a partition refuses many).
		fault := !errors.Is(err, ErrNotReplicated)
		if rerr := a.mgr.persist(a.snapshot()); rerr != nil {
			return reply{res: errorResult(fmt.Errorf("%s: the new state could not be saved everywhere (%w); the session here keeps its previous state, but the update may have been recorded: read the session before you retry", what, err)), fault: fault}, nil
		}
		return reply{res: errorResult(fmt.Errorf("%s: the new state could not be saved, so it was not applied (%w); the previous state was saved back: retrying is safe", what, err)), fault: fault}, nil
	}
	evs := a.publish(st)
	if cmd == nil {
		return reply{}, evs
	}
	run, err := a.startCommand(ctx, cmd, label)
	if err != nil {
		return reply{res: errorResult(err)}, evs
	}
	return reply{cmd: run}, evs
}

func (a *actor) update(ctx context.Context, msg Msg) (m Model, cmd Command, err error) {
	defer func() {
		if p := recover(); p != nil {
			m, cmd, err = nil, nil, fmt.Errorf("update panicked: %v", p)
			a.mgr.log.Error("update panicked", "session", a.info.ID, "app", a.info.App, "panic", fmt.Sprint(p))
		}
	}()
	a.mu.RLock()
	cur := a.model
	a.mu.RUnlock()
	if cu, ok := a.app.(ContextUpdater); ok {
		m, err = cu.UpdateContext(ctx, cur, msg)
	} else {
		m, err = a.app.Update(cur, msg)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("update: %w", err)
	}
	if m, cmd, err = unwrapCommand(m); err != nil {
		return nil, nil, fmt.Errorf("update: %w", err)
	}
	return m, cmd, nil
}

// snapshot returns the session's snapshot.
func (a *actor) snapshot() Snapshot {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return Snapshot{Info: a.info, Model: a.modelJSON, Tools: append([]Tool(nil), a.tools.tools...)}
}

// hasTool reports whether tool is in the session's sticky set.
func (a *actor) hasTool(tool string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.tools.get(tool)
	return ok
}

// breaker returns the circuit breaker of tool, creating it on first use.
func (a *actor) breaker(tool string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	a.bmu.Lock()
	defer a.bmu.Unlock()
	if b, ok := a.breakers[tool]; ok {
		return b
	}
	if a.breakers == nil {
		a.breakers = map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]{}
	}
	b := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        tool,
		MaxRequests: 1,
		Timeout:     a.mgr.cfg.BreakerTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(a.mgr.cfg.BreakerFaults) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotCounted) },
	})
	a.breakers[tool] = b
	return b
}

var (
	errFault      = errors.New("fault")
	errNotCounted = errors.New("not counted")
)
