package standby

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/mcpswarm/mcpswarm/journal"
)

// ErrStale is returned by Hold when the snapshot's epoch is older than the
// one this node holds or has promoted: its sender is no longer the owner.
var ErrStale = errors.New("standby: snapshot of an older ownership epoch")

// ErrNoCopy is returned by Promote when this node holds no copy of the
// session.
var ErrNoCopy = errors.New("standby: no copy of this session here")

// Copy is a session's state as a standby holds it.
type Copy struct {
	// Session is the session id.
	Session string `json:"-"`
	// Owner names the node that shipped it.
	Owner string `json:"owner"`
	// Epoch is the ownership epoch (the session's handoff generation) it
	// was shipped under, Seq the owner's count of snapshots within it.
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
	// Snapshot is the session's snapshot (JSON) as the owner journals it.
	Snapshot json.RawMessage `json:"snapshot"`
}

// verdict is what admit decides about an incoming copy.
type verdict int

const (
	replace verdict = iota // hold the incoming copy
	keep                   // already hold it or newer within the epoch: acknowledge, change nothing
	refuse                 // an older epoch than held or fenced: ErrStale
)

// admit decides whether in replaces held (have: a copy is held; fence: the
// lowest epoch this node still accepts for the session, after a promotion).
// Within an epoch the owner ships in order, so an older seq is a duplicate
// delivery: acknowledged, not applied.
func admit(held Copy, have bool, fence uint64, in Copy) verdict {
	switch {
	case in.Epoch < fence:
		return refuse
	case !have:
		return replace
	case in.Epoch < held.Epoch:
		return refuse
	case in.Epoch == held.Epoch && in.Seq <= held.Seq:
		return keep
	}
	return replace
}

// maxFences bounds the fences a Holder remembers; past it the oldest go.
// A fence only matters while an old owner may still be alive and
// unaware of its demotion, which membership ends within seconds.
const maxFences = 100_000

// Holder keeps the copies this node holds as a standby, in memory and in a
// journal of their own (fsynced in the background, as the owner's own
// journal in replica mode). It is safe for concurrent use.
type Holder struct {
	j   Store
	log *slog.Logger

	mu     sync.Mutex
	copies map[string]Copy
	// fences hold, per promoted session, the lowest epoch still accepted:
	// a paused old owner that wakes up is refused here.
	fences     map[string]uint64
	fenceOrder []string
	// buf encodes the copy being written (the journal copies it).
	buf []byte
}

// Store is where a Holder keeps its copies: a journal.Journal, or in a
// simulation an in-memory stand-in that outlives the holder's process.
type Store interface {
	Load(fn func(key string, value []byte) error) error
	Put(key string, value []byte) error
	Delete(key string) error
	Close() error
}

var _ Store = (*journal.Journal)(nil)

// OpenHolder opens (or creates) the standby journal in dir and loads the
// copies it holds.
func OpenHolder(dir string, log *slog.Logger) (*Holder, error) {
	if log == nil {
		log = slog.Default()
	}
	j, err := journal.Open(dir, journal.Options{Mode: journal.Process, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("opening the standby journal: %w", err)
	}
	return NewHolder(j, log)
}

// NewHolder returns a Holder keeping its copies in st and loads the copies
// st holds. The Holder owns st: Close closes it.
func NewHolder(st Store, log *slog.Logger) (*Holder, error) {
	if log == nil {
		log = slog.Default()
	}
	h := &Holder{j: st, log: log, copies: map[string]Copy{}, fences: map[string]uint64{}}
	err := st.Load(func(key string, value []byte) error {
		var c Copy
		if err := json.Unmarshal(value, &c); err != nil {
			log.Error("skipping a standby copy that does not decode", "session", key, "err", err)
			return nil
		}
		c.Session = key
		h.copies[key] = c
		return nil
	})
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("loading the standby journal: %w", err)
	}
	return h, nil
}

// Hold stores c unless it is older than what is held; it returns what the
// holder holds afterwards. The copy is written to the journal (write(2))
// before Hold returns.
func (h *Holder) Hold(c Copy) (Copy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	held, have := h.copies[c.Session]
	switch admit(held, have, h.fences[c.Session], c) {
	case refuse:
		return held, fmt.Errorf("holding session %s at epoch %d: %w (held: epoch %d, fence %d)", c.Session, c.Epoch, ErrStale, held.Epoch, h.fences[c.Session])
	case keep:
		return held, nil
	}
	if !json.Valid(c.Snapshot) {
		return held, fmt.Errorf("holding session %s: the snapshot is not JSON", c.Session)
	}
	c.Snapshot = slices.Clone(c.Snapshot)
	h.buf = appendCopy(h.buf[:0], c)
	if err := h.j.Put(c.Session, h.buf); err != nil {
		return held, fmt.Errorf("writing the standby copy of %s: %w", c.Session, err)
	}
	h.copies[c.Session] = c
	return c, nil
}

// appendCopy appends c's journal record, the JSON encoding of c, to b.
// It writes the snapshot as it came, already checked to be JSON: this runs
// on every replicated write's path, and json.Marshal of a
// json.RawMessage scans and compacts the whole snapshot again (half the
// standby's work per write).
func appendCopy(b []byte, c Copy) []byte {
	b = append(b, `{"owner":`...)
	if plain(c.Owner) {
		b = append(append(append(b, '"'), c.Owner...), '"')
	} else {
		q, _ := json.Marshal(c.Owner) // a string always encodes
		b = append(b, q...)
	}
	b = append(b, `,"epoch":`...)
	b = strconv.AppendUint(b, c.Epoch, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, `,"snapshot":`...)
	b = append(b, c.Snapshot...)
	return append(b, '}')
}

// plain reports whether s is printable ASCII that a JSON string holds
// without escapes.
func plain(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Release drops the copy of session unless it is of a later epoch than
// epoch (a newer owner already ships it here).
func (h *Holder) Release(session string, epoch uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	held, have := h.copies[session]
	if !have || held.Epoch > epoch {
		return nil
	}
	delete(h.copies, session)
	if err := h.j.Delete(session); err != nil {
		return fmt.Errorf("dropping the standby copy of %s: %w", session, err)
	}
	return nil
}

// Get returns the copy of session, if held.
func (h *Holder) Get(session string) (Copy, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.copies[session]
	return c, ok
}

// Promote takes the copy of session out of the holder to run it as its new
// owner under epoch+1, and fences the session: from now on a snapshot of
// an epoch older than epoch+1 is refused here. The copy stays in the
// journal until the caller's own journal has the session (Forget).
func (h *Holder) Promote(session string) (Copy, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.copies[session]
	if !ok {
		return Copy{}, fmt.Errorf("promoting session %s: %w", session, ErrNoCopy)
	}
	delete(h.copies, session)
	h.fenceLocked(session, c.Epoch+1)
	return c, nil
}

// ErrNotFinal is returned by HandOver when the copy held is not the one a
// draining owner hands the session over with: shipped by another owner,
// under another epoch, or not its final snapshot.
var ErrNotFinal = errors.New("standby: the copy held is not the owner's final snapshot")

// HandOver takes the copy of session out of the holder, as Promote does,
// for a handoff its live owner asked for: only if owner shipped it under
// epoch and check accepts it (it is the owner's final snapshot); otherwise
// it answers ErrNotFinal and changes nothing. undo puts the copy back and
// lifts the fence again: the owner, refused or let down, keeps the
// session under epoch or copies it elsewhere, and must still be able to
// ship it here.
func (h *Holder) HandOver(session, owner string, epoch uint64, check func(Copy) error) (Copy, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.copies[session]
	switch {
	case !ok:
		return Copy{}, nil, fmt.Errorf("handing session %s over: %w", session, ErrNoCopy)
	case c.Owner != owner || c.Epoch != epoch:
		return Copy{}, nil, fmt.Errorf("handing session %s over from %s at epoch %d: %w (held: from %s at epoch %d)", session, owner, epoch, ErrNotFinal, c.Owner, c.Epoch)
	}
	if err := check(c); err != nil {
		return Copy{}, nil, fmt.Errorf("handing session %s over: %w: %w", session, ErrNotFinal, err)
	}
	prev := h.fences[session]
	delete(h.copies, session)
	h.fenceLocked(session, c.Epoch+1)
	undo := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.copies[session]; !ok {
			h.copies[session] = c
		}
		if h.fences[session] == c.Epoch+1 {
			h.fences[session] = prev
		}
	}
	return c, undo, nil
}

// Unpromote puts back a copy Promote took when the promotion did not go
// through, keeping the fence.
func (h *Holder) Unpromote(c Copy) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.copies[c.Session]; !ok {
		h.copies[c.Session] = c
	}
}

// Forget drops a promoted session's copy from the journal.
func (h *Holder) Forget(session string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.copies[session]; ok {
		return nil // held again (a newer owner ships it here)
	}
	if err := h.j.Delete(session); err != nil {
		return fmt.Errorf("dropping the promoted copy of %s: %w", session, err)
	}
	return nil
}

func (h *Holder) fenceLocked(session string, epoch uint64) {
	if _, ok := h.fences[session]; !ok {
		h.fenceOrder = append(h.fenceOrder, session)
		for len(h.fenceOrder) > maxFences {
			delete(h.fences, h.fenceOrder[0])
			h.fenceOrder = h.fenceOrder[1:]
		}
	}
	h.fences[session] = max(h.fences[session], epoch)
}

// Copies lists the copies held, without their snapshots, sorted by
// session.
func (h *Holder) Copies() []Copy {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Copy, 0, len(h.copies))
	for _, id := range slices.Sorted(maps.Keys(h.copies)) {
		c := h.copies[id]
		c.Snapshot = nil
		out = append(out, c)
	}
	return out
}

// Close syncs and closes the standby journal.
func (h *Holder) Close() error { return h.j.Close() }
