package ui

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
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

// JournalSlots is how many recent actions each node keeps per session: the
// journal is a ring, so its size is bounded by sessions × nodes × slots.
const JournalSlots = 32

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
// so a tool call does not wait for a bbolt write it does not need.
type Journal struct {
	reg  *cluster.Registry
	node string
	log  *slog.Logger

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

// NewJournal declares the journal's registry on c; call it before c starts.
func NewJournal(c *cluster.Cluster, node string, log *slog.Logger) (*Journal, error) {
	reg, err := c.Registry(RegistryName)
	if err != nil {
		return nil, fmt.Errorf("declaring the UI action journal: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Journal{reg: reg, node: node, log: log, warnEvery: rate.Sometimes{First: 1, Interval: 10 * time.Second}}
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
	j.queue, j.done = make(chan entry, 256), make(chan struct{})
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

func (j *Journal) run(q <-chan entry, done chan<- struct{}) {
	defer close(done)
	for e := range q {
		if e.forget != "" {
			for i := range uint64(JournalSlots) {
				_ = j.reg.Remove(slotKey(e.forget, i))
			}
			continue
		}
		a := e.action
		b, err := json.Marshal(a)
		if err != nil {
			continue // strings and a time always encode
		}
		if err := j.reg.Put(slotKey(a.Session, a.Seq), b); err != nil {
			j.log.Debug("journaling a UI action", "session", a.Session, "err", err)
		}
	}
}

func slotKey(session string, seq uint64) string {
	return fmt.Sprintf("%s/%02d", session, seq%JournalSlots)
}

// Record journals a on this node. A full queue drops the entry (and logs
// it): the journal is a view, never a reason to slow a call.
func (j *Journal) Record(a Action) {
	if j == nil {
		return
	}
	j.mu.Lock()
	j.seq++
	a.Seq, a.Node = j.seq, j.node
	j.mu.Unlock()
	j.enqueue(entry{action: a})
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
	// Sending under the lock orders it with Stop's close.
	j.mu.Lock()
	defer j.mu.Unlock()
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
// oldest first, at most limit of them.
func (j *Journal) Actions(session string, limit int) []Action {
	var out []Action
	prefix := session + "/"
	j.reg.Range(func(e crdt.Entry) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return true
		}
		var a Action
		if err := json.Unmarshal(e.Value, &a); err == nil && a.Session == session {
			out = append(out, a)
		}
		return true
	})
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
