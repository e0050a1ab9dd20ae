package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/watch"
	"golang.org/x/time/rate"
)

// RegistryName is the replicated registry holding the action journal.
const RegistryName = "uiactions"

// JournalSlots bounds the journal per session and node: a node keeps at
// most JournalSlots entries for a session, and readers show at most its
// newest JournalSlots actions of that session.
const JournalSlots = 32

// DefaultGather is how long the writer gathers actions before writing them
// when NewJournal is given no GatherWindow: long enough that a session
// clicked hundreds of times a second (an agent's loop) costs one registry
// write per several actions, short enough that a person watching the event
// log does not see the delay.
const DefaultGather = 20 * time.Millisecond

// journalQueue is the capacity of the writer's queue. It also bounds what
// the writer gathers before writing, so a burst is written at once rather
// than at the end of the window, and the writer holds at most that many
// actions in memory.
const journalQueue = 256

// Source says through which door an action came.
type Source string

// The sources of a journaled action.
const (
	// SourceAgent: a tool call from an MCP client.
	SourceAgent Source = "agent"
	// SourcePage: a click or typing in the session page.
	SourcePage Source = "page"
)

// Action is one journaled action on a session.
type Action struct {
	Session   string    `json:"session"`
	Tool      string    `json:"tool"`
	Source    Source    `json:"source"`
	Principal string    `json:"principal"`
	Node      string    `json:"node"`
	At        time.Time `json:"at"`
	// Error is set when the call failed or the tool answered an error.
	Error string `json:"error,omitempty"`
	Seq   uint64 `json:"seq"`
}

// Journal records actions in a replicated registry. Record never blocks
// the caller: entries go through a bounded queue to one writer goroutine,
// so a tool call does not wait for a registry write it does not need.
//
// The writer gathers: after taking an action it takes what else is queued
// and what arrives within the gather window (DefaultGather), then writes
// each session's gathered actions as one entry, a JSON array under the key
// <session>/<NN>, NN numbering the session's batches mod JournalSlots. A
// registry write is a CRDT write, a delta in the replication log and a
// delta shipped to every peer: one per click measured 5 % of a node's CPU
// and 16 % of its allocations under 16 clicking agents.
//
// The state is bounded: a batch holds at most the newest JournalSlots of a
// session's gathered actions, and after writing one the writer removes this
// node's entries of the session whose actions are all older than its
// newest JournalSlots, so a node keeps at most JournalSlots entries per
// session (fewer under load), holding the session's newest JournalSlots
// actions and at most JournalSlots-1 older ones in the oldest entry kept,
// which Actions skips. The whole journal is bounded by sessions × nodes ×
// JournalSlots entries.
type Journal struct {
	reg    *cluster.Registry
	node   string
	log    *slog.Logger
	gather time.Duration

	queue chan entry
	done  chan struct{}

	mu       sync.Mutex
	seq      uint64
	watchers watch.Set[string]
	stopped  bool
	// dropped counts entries a full queue refused since the last warning;
	// warnEvery keeps a sustained overload from logging once per call.
	dropped   int
	warnEvery rate.Sometimes
}

// JournalOption adjusts a Journal made by NewJournal.
type JournalOption func(*Journal)

// GatherWindow sets how long the writer waits, after taking an action, for
// more to write with it (DefaultGather when not given). Zero or less writes
// what is queued at once, waiting for nothing.
func GatherWindow(d time.Duration) JournalOption {
	return func(j *Journal) { j.gather = max(d, 0) }
}

// NewJournal declares the journal's registry on c; call it before c starts.
func NewJournal(c *cluster.Cluster, node string, log *slog.Logger, opts ...JournalOption) (*Journal, error) {
	reg, err := c.Registry(RegistryName)
	if err != nil {
		return nil, fmt.Errorf("declaring the UI action journal: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Journal{reg: reg, node: node, log: log, gather: DefaultGather, warnEvery: rate.Sometimes{First: 1, Interval: 10 * time.Second}}
	for _, o := range opts {
		o(j)
	}
	reg.OnChange(j.onChange)
	return j, nil
}

// Start runs the writer until Stop. Record before Start queues.
func (j *Journal) Start() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.queue != nil {
		return
	}
	j.queue, j.done = make(chan entry, journalQueue), make(chan struct{})
	go j.run(j.queue, j.done)
}

// Stop ends the writer after it has written what is queued.
func (j *Journal) Stop() {
	j.mu.Lock()
	q, done := j.queue, j.done
	if q == nil || j.stopped {
		j.mu.Unlock()
		return
	}
	j.stopped = true
	close(q)
	j.mu.Unlock()
	<-done
}

// entry is one job for the writer: an action to record, or a stopped
// session whose entries this node removes.
type entry struct {
	action Action
	forget string
}

// run is the writer: it takes an entry, gathers more (gatherMore) and
// writes them (flush), until q is closed and drained.
func (j *Journal) run(q <-chan entry, done chan<- struct{}) {
	defer close(done)
	w := writer{j: j, sessions: map[string]*ring{}}
	var window *time.Timer
	if j.gather > 0 {
		window = time.NewTimer(j.gather)
		window.Stop()
		defer window.Stop()
	}
	for e := range q {
		w.add(e)
		open := w.gatherMore(q, window)
		w.flush()
		if !open {
			return
		}
	}
}

// writer is the writer goroutine's state: the actions gathered for the
// next write, and where each session's ring of entries stands. Only the
// writer goroutine touches it; being this node's only writer of the
// journal, it knows this node's entries without reading them back.
type writer struct {
	j        *Journal
	sessions map[string]*ring
	// dirty lists the rings with gathered actions, in the order their
	// first one came.
	dirty []*ring
	// gathered counts the entries taken since the last write.
	gathered int
}

// ring is one session's entries on this node.
type ring struct {
	session string
	// next numbers the session's next batch, written to slot
	// next%JournalSlots.
	next uint64
	// counts holds how many actions each slot's entry carries; 0 is no
	// entry.
	counts [JournalSlots]uint8
	// pending holds the actions gathered for the next batch, oldest first.
	pending []Action
}

// add takes one entry from the queue.
func (w *writer) add(e entry) {
	w.gathered++
	if e.forget != "" {
		w.forget(e.forget)
		return
	}
	r := w.sessions[e.action.Session]
	if r == nil {
		r = &ring{session: e.action.Session}
		w.sessions[r.session] = r
	}
	if len(r.pending) == 0 {
		w.dirty = append(w.dirty, r)
	}
	if len(r.pending) == 2*JournalSlots {
		// Only the newest JournalSlots are written: drop older ones now
		// so a burst on one session holds little memory.
		r.pending = r.pending[:copy(r.pending, r.pending[JournalSlots:])]
	}
	r.pending = append(r.pending, e.action)
}

// gatherMore adds what is queued and, with a window, what arrives until it
// closes, up to journalQueue entries in all. It reports whether q is still
// open: closed and drained, the writer writes and ends.
func (w *writer) gatherMore(q <-chan entry, window *time.Timer) bool {
	if window != nil {
		// Since Go 1.23 Reset discards a tick from an earlier window
		// that was not received.
		window.Reset(w.j.gather)
	}
	for w.gathered < journalQueue {
		var e entry
		var ok bool
		if window == nil {
			select {
			case e, ok = <-q:
			default:
				return true
			}
		} else {
			select {
			case e, ok = <-q:
			case <-window.C:
				return true
			}
		}
		if !ok {
			return false
		}
		w.add(e)
	}
	return true
}

// flush writes each session's gathered actions as one entry.
func (w *writer) flush() {
	for i, r := range w.dirty {
		if len(r.pending) > 0 { // else forgotten since
			w.write(r)
		}
		w.dirty[i] = nil
	}
	w.dirty, w.gathered = w.dirty[:0], 0
}

// write puts r's pending actions (the newest JournalSlots of them) into its
// next slot, then removes the slots that only hold actions older than the
// session's newest JournalSlots.
func (w *writer) write(r *ring) {
	batch := r.pending[max(0, len(r.pending)-JournalSlots):]
	b, err := json.Marshal(batch) // strings and times always encode
	n := len(batch)
	clear(r.pending)
	if cap(r.pending) > JournalSlots {
		r.pending = nil // a burst's buffer: do not keep it for a session at rest
	} else {
		r.pending = r.pending[:0]
	}
	if err != nil {
		return
	}
	slot := r.next % JournalSlots
	if err := w.j.reg.Put(slotKey(r.session, slot), b); err != nil {
		// Lost, as the journal is a lossy view; the next batch takes
		// the same slot.
		w.j.log.Debug("journaling UI actions", "session", r.session, "actions", n, "err", err)
		return
	}
	r.next++
	r.counts[slot] = uint8(n)
	kept := 0
	for back := range uint64(JournalSlots) {
		s := (slot + JournalSlots - back) % JournalSlots
		if kept < JournalSlots {
			kept += int(r.counts[s])
			continue
		}
		if r.counts[s] > 0 {
			r.counts[s] = 0
			if err := w.j.reg.Remove(slotKey(r.session, s)); err != nil {
				w.j.log.Debug("removing old UI actions", "session", r.session, "err", err)
			}
		}
	}
}

// forget drops the session's gathered actions and removes its entries.
// It removes every slot, not only those the ring knows of: removing an
// absent key writes nothing, and entries no ring of this writer knows
// (restored from a store, were the registry stored) go too.
func (w *writer) forget(session string) {
	if r := w.sessions[session]; r != nil {
		clear(r.pending)
		r.pending = r.pending[:0] // flush skips it; a later action makes a new ring
		delete(w.sessions, session)
	}
	for s := range uint64(JournalSlots) {
		_ = w.j.reg.Remove(slotKey(session, s))
	}
}

// slotKey is the key of slot (below 100) of session's entries: session,
// a slash and two digits. strconv returns small numbers without
// allocating, so the key costs one concatenation.
func slotKey(session string, slot uint64) string {
	if slot < 10 {
		return session + "/0" + strconv.FormatUint(slot, 10)
	}
	return session + "/" + strconv.FormatUint(slot, 10)
}

// Record journals a on this node. A full queue drops the entry (and logs
// it): the journal is a view, never a reason to slow a call.
func (j *Journal) Record(a Action) {
	if j == nil {
		return
	}
	// Numbering and queueing under one lock keeps the queue in Seq order,
	// so the writer's newest actions are the newest by Seq, as readers
	// count them.
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	a.Seq, a.Node = j.seq, j.node
	j.enqueueLocked(entry{action: a})
}

// Forget removes this node's entries for a session that stopped. It never
// blocks.
func (j *Journal) Forget(session string) {
	if j == nil || session == "" {
		return
	}
	j.enqueue(entry{forget: session})
}

func (j *Journal) enqueue(e entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.enqueueLocked(e)
}

// enqueueLocked queues e for the writer; j.mu is held, which orders the
// send with Stop's close.
func (j *Journal) enqueueLocked(e entry) {
	if j.queue == nil || j.stopped {
		return
	}
	select {
	case j.queue <- e:
	default:
		j.dropped++
		j.warnEvery.Do(func() {
			j.log.Warn("UI action journal queue full; dropping entries", "dropped", j.dropped, "last_session", e.action.Session+e.forget)
			j.dropped = 0
		})
	}
}

// Actions returns the journaled actions of session across every live node,
// oldest first (by time, node, then Seq), the newest limit of them when
// limit > 0. Of each node it shows at most the newest JournalSlots.
//
// An entry's value is a JSON array of actions, or a single action object
// as nodes of the previous release write: both are read, so a cluster
// being upgraded shows every node's actions here. A previous release's
// reader skips the arrays (they do not decode into an Action), so its
// pages miss the upgraded nodes' actions until it is upgraded too.
func (j *Journal) Actions(session string, limit int) []Action {
	var out []Action
	prefix := session + "/"
	// Range visits the entries origin by origin: trim each origin's run
	// to its newest JournalSlots as it ends (were an origin's entries
	// split in several runs, each trimmed run would still hold all of
	// that origin's newest).
	var origin crdt.Origin
	run := 0
	j.reg.Range(func(e crdt.Entry) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return true
		}
		if e.Origin != origin {
			out = newestOfRun(out, run)
			origin, run = e.Origin, len(out)
		}
		out = decodeActions(out, e.Value, session)
		return true
	})
	out = newestOfRun(out, run)
	sort.Slice(out, func(i, k int) bool {
		if !out[i].At.Equal(out[k].At) {
			return out[i].At.Before(out[k].At)
		}
		if out[i].Node != out[k].Node {
			return out[i].Node < out[k].Node
		}
		return out[i].Seq < out[k].Seq
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// decodeActions appends to out the actions of session in an entry's value:
// a JSON array of actions, or one action object (the previous release's
// format). A value that decodes to neither is skipped.
func decodeActions(out []Action, value []byte, session string) []Action {
	if v := bytes.TrimLeft(value, " \t\r\n"); len(v) > 0 && v[0] == '[' {
		var batch []Action
		if json.Unmarshal(v, &batch) != nil {
			return out
		}
		for _, a := range batch {
			if a.Session == session {
				out = append(out, a)
			}
		}
		return out
	}
	var a Action
	if json.Unmarshal(value, &a) == nil && a.Session == session {
		out = append(out, a)
	}
	return out
}

// newestOfRun keeps, of out[start:] (one node's actions), the newest
// JournalSlots by Seq: the oldest entry a writer keeps may hold older ones.
func newestOfRun(out []Action, start int) []Action {
	run := out[start:]
	if len(run) <= JournalSlots {
		return out
	}
	sort.Slice(run, func(i, k int) bool { return run[i].Seq < run[k].Seq })
	return append(out[:start], run[len(run)-JournalSlots:]...)
}

// Watch calls fn with the session id of every journal change until cancel.
// fn must not block.
func (j *Journal) Watch(fn func(session string)) (cancel func()) { return j.watchers.Add(fn) }

func (j *Journal) onChange(ch crdt.Change) {
	sid, _, ok := strings.Cut(ch.Key, "/")
	if !ok {
		return
	}
	j.watchers.Notify(sid)
}

// Len counts the journal's entries on this node, every node's included: a
// stopped session's must go (issue #13's leak test counts them).
func (j *Journal) Len() int { return j.reg.Len() }
