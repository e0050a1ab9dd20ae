package cluster

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// Registry is a named replicated map: this node writes its own entries, and
// sees every live origin's entries. Safe for concurrent use.
type Registry struct {
	name string
	c    *Cluster

	mu sync.Mutex // guards m and orders writes with their pushes
	m  *crdt.Map

	out    serialQueue[crdt.Change]
	fnsMu  sync.Mutex
	fns    []func(crdt.Change)
	hidden []func(crdt.Change) // OnHiddenChange's
}

func newRegistry(c *Cluster, name string) *Registry {
	cfg := c.cfg.CRDT
	cfg.Registry = name
	r := &Registry{name: name, c: c, m: crdt.New(c.origin, cfg)}
	r.m.OnChange(r.out.add) // called under r.mu, in map order
	r.m.OnHiddenChange(r.out.add)
	return r
}

// Name returns the registry's name.
func (r *Registry) Name() string { return r.name }

// Put sets key to value under this node's origin. The entry is written to
// the store in the same transaction as the map change, then pushed to
// peers; a value equal to this node's current one is not written again.
// It returns ErrNotStarted before Start and ErrStopped after Stop.
func (r *Registry) Put(key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return r.write(key, value)
}

// Remove deletes key from this node's origin; removing an absent key is not
// an error.
func (r *Registry) Remove(key string) error {
	return r.write(key, nil)
}

func (r *Registry) write(key string, value []byte) error {
	if err := r.c.writable(); err != nil {
		return err
	}
	r.mu.Lock()
	old, had := r.m.Get(r.c.origin, key)
	if had && value != nil && bytes.Equal(old.Value, value) {
		// Already this node's entry, byte for byte: writing it again
		// would change nothing a reader sees, yet cost a store
		// transaction, a delta to every peer and its copy in the map's
		// arena until compaction (a session start wrote its record and
		// tool set twice each).
		r.mu.Unlock()
		return nil
	}
	var d crdt.Delta
	applied := false
	err := r.c.store.Write(r.name, key, value, func() error {
		var err error
		if value == nil {
			d, applied = r.m.Remove(key)
			return nil
		}
		d, err = r.m.Put(key, value)
		applied = err == nil
		return err
	})
	if err != nil && applied {
		// The map changed but the store did not commit: undo in the map.
		var undo crdt.Delta
		if had {
			undo, _ = r.m.Put(key, old.Value)
		} else {
			undo, _ = r.m.Remove(key)
		}
		r.c.repl.local(r.name, d)
		r.c.repl.local(r.name, undo)
	} else if applied {
		r.c.repl.local(r.name, d)
	}
	r.mu.Unlock()
	r.flush()
	if err != nil {
		if value == nil {
			return fmt.Errorf("removing %s/%s: %w", r.name, key, err)
		}
		return fmt.Errorf("putting %s/%s: %w", r.name, key, err)
	}
	return nil
}

// Get returns the visible entry of origin o under key.
func (r *Registry) Get(o crdt.Origin, key string) (crdt.Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Get(o, key)
}

// Lookup returns the visible entries under key across origins, sorted by
// origin.
func (r *Registry) Lookup(key string) []crdt.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Lookup(key)
}

// Range calls fn for every visible entry in a deterministic order until fn
// returns false. fn runs under the registry's lock: it must not write to the
// registry.
func (r *Registry) Range(fn func(crdt.Entry) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Range(fn)
}

// Len returns the number of visible entries.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Count()
}

// OnChange registers fn for every visible change (local writes, remote
// deltas, hiding, dropping). It is called outside the registry's lock, in
// order, from one goroutine at a time; it must not block long.
func (r *Registry) OnChange(fn func(crdt.Change)) {
	r.fnsMu.Lock()
	r.fns = append(r.fns, fn)
	r.fnsMu.Unlock()
}

// OnHiddenChange registers fn, like OnChange, for the changes peers relay
// to the entries of an origin hidden here (dead, departed or unreachable):
// the last records a dead node wrote, which reached this node only through
// others. They are not visible; a reader of dead nodes' data needs them.
func (r *Registry) OnHiddenChange(fn func(crdt.Change)) {
	r.fnsMu.Lock()
	r.hidden = append(r.hidden, fn)
	r.fnsMu.Unlock()
}

// Hidden reports whether origin o's entries are hidden (its node is dead,
// departed or unreachable).
func (r *Registry) Hidden(o crdt.Origin) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Hidden(o)
}

// Digest returns the version of every origin this registry holds.
func (r *Registry) Digest() []crdt.Version {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Digest()
}

// flush delivers queued changes to the OnChange callbacks.
func (r *Registry) flush() { r.out.drain(r.deliver) }

// deliver hands one change to the callbacks registered for its kind.
func (r *Registry) deliver(ch crdt.Change) {
	r.fnsMu.Lock()
	fns := r.fns
	if ch.Hidden {
		fns = r.hidden
	}
	r.fnsMu.Unlock()
	for _, fn := range fns {
		fn(ch)
	}
}

// settle delivers every change made so far to the OnChange callbacks, or
// waits until the goroutine delivering them has: what a peer acknowledges
// is visible to the layers above. Not for use inside a callback.
func (r *Registry) settle() {
	r.out.settle(r.deliver)
}

// with runs fn on the map under the lock, then delivers the changes.
func (r *Registry) with(fn func(m *crdt.Map)) {
	r.mu.Lock()
	fn(r.m)
	r.mu.Unlock()
	r.flush()
}

// restore loads this node's stored entries into the map under the new
// epoch. The deltas it produces are queued for peers like local writes.
func (r *Registry) restore() (int, error) {
	n := 0
	r.mu.Lock()
	err := r.c.store.Load(r.name, func(key string, value []byte) error {
		d, err := r.m.Put(key, value)
		if err != nil {
			return fmt.Errorf("restoring %s/%s: %w", r.name, key, err)
		}
		r.c.repl.local(r.name, d)
		n++
		return nil
	})
	r.mu.Unlock()
	r.flush()
	return n, err
}

// apply applies a remote delta.
func (r *Registry) apply(d crdt.Delta) (crdt.ApplyResult, error) {
	r.mu.Lock()
	r.c.hideIfGone(r.m, d.Origin)
	res, err := r.m.Apply(d)
	r.mu.Unlock()
	r.flush()
	return res, err
}

// dropped reports whether this registry ignores origin o's data: o was
// deleted after its grace and is still remembered.
func (r *Registry) dropped(o crdt.Origin) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Dropped(o)
}

// seq returns what this registry holds of origin o.
func (r *Registry) seq(o crdt.Origin) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m.Seq(o)
}

// pendingWrite is a local delta waiting for the next push.
type pendingWrite struct {
	registry string
	delta    crdt.Delta
	at       time.Time
}
