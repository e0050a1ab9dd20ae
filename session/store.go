package session

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"
)

// Snapshot is what a Store keeps of a session: its info, its model as JSON
// and its sticky tool set.
type Snapshot struct {
	Info  Info            `json:"info"`
	Model json.RawMessage `json:"model"`
	Tools []Tool          `json:"tools"`
	// enc holds Info and Tools already encoded (see snapshotParts) when
	// the actor built the snapshot; nil encodes them on MarshalJSON.
	enc *snapshotParts
}

// Store keeps session snapshots. It must be safe for concurrent use. The
// node implements it over a journal (package journal).
//
// The Manager calls Save after every applied update, from the session's
// goroutine, and answers the call only after Save has returned nil: when
// Save returns, the snapshot must be as durable as the Store promises (and
// a Store that writes behind must say what a crash loses). A Save error
// refuses the update: the session keeps its previous state and the caller
// is told. Delete is called when a session stops, with the same
// durability; Load once, at start, before any Save.
type Store interface {
	Save(s Snapshot) error
	Delete(id string) error
	Load() ([]Snapshot, error)
}

// MemoryStore is a Store in memory, for tests and embedders without disk.
type MemoryStore struct {
	mu    sync.Mutex
	snaps map[string]Snapshot
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{snaps: map[string]Snapshot{}} }

// Save implements Store.
func (s *MemoryStore) Save(snap Snapshot) error {
	snap.Model = slices.Clone(snap.Model)
	snap.Tools = slices.Clone(snap.Tools)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[snap.Info.ID] = snap
	return nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.snaps, id)
	return nil
}

// Load implements Store; snapshots come sorted by session id.
func (s *MemoryStore) Load() ([]Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Snapshot, 0, len(s.snaps))
	for _, id := range slices.Sorted(maps.Keys(s.snaps)) {
		out = append(out, s.snaps[id])
	}
	return out, nil
}

var _ Store = (*MemoryStore)(nil)
