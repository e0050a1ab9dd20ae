package mcpswarm

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// snapshotBucket is the node-local bucket of session snapshots in the
// node's bbolt file. It is not a replicated registry: models stay on their
// owner; other nodes see only the session and tool records.
const snapshotBucket = "snapshots"

// snapshotStore keeps session snapshots in the node's bbolt file, so a
// restarted owner restores its sessions with their models.
//
// It writes behind: Save and Delete hand the newest state of a session to a
// writer goroutine and return, so a tool call never waits for an fsync.
// Bursts coalesce (ten updates between two writes cost one write), and
// close writes whatever is still pending. A crash loses at most the updates
// of the write in flight.
type snapshotStore struct {
	st  cluster.Storage
	log *slog.Logger

	mu      sync.Mutex
	pending map[string][]byte // nil value: delete
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newSnapshotStore(st cluster.Storage, log *slog.Logger) *snapshotStore {
	s := &snapshotStore{st: st, log: log, pending: map[string][]byte{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// snapshotDelay is how long the writer gathers snapshots before a round
// of writes: a session clicked every few hundred microseconds is written
// (and fsynced) once per round, not once per click.
const snapshotDelay = 2 * time.Millisecond

func (s *snapshotStore) run() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due <-chan time.Time // nil until something waits to be written
	kick := s.kick
	for {
		select {
		case <-kick:
			kick = nil
			timer.Reset(snapshotDelay)
			due = timer.C
		case <-due:
			due, kick = nil, s.kick
			s.flush()
		case <-s.stop:
			timer.Stop()
			s.flush()
			return
		}
	}
}

func (s *snapshotStore) flush() {
	s.mu.Lock()
	batch := s.pending
	s.pending = map[string][]byte{}
	s.mu.Unlock()
	for id, b := range batch {
		if err := s.st.Write(snapshotBucket, id, b, func() error { return nil }); err != nil {
			s.log.Warn("writing session snapshot", "session", id, "err", err)
		}
	}
}

func (s *snapshotStore) enqueue(id string, b []byte) {
	s.mu.Lock()
	s.pending[id] = b
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Save implements session.Store.
func (s *snapshotStore) Save(snap session.Snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encoding snapshot of %s: %w", snap.Info.ID, err)
	}
	s.enqueue(snap.Info.ID, b)
	return nil
}

// Delete implements session.Store.
func (s *snapshotStore) Delete(id string) error {
	s.enqueue(id, nil)
	return nil
}

// Load implements session.Store. It reads what is on disk; the node calls it
// at start, before any Save.
func (s *snapshotStore) Load() ([]session.Snapshot, error) {
	var out []session.Snapshot
	err := s.st.Load(snapshotBucket, func(key string, value []byte) error {
		var snap session.Snapshot
		if err := json.Unmarshal(value, &snap); err != nil {
			return fmt.Errorf("decoding snapshot %s: %w", key, err)
		}
		out = append(out, snap)
		return nil
	})
	return out, err
}

// close writes what is pending and stops the writer.
func (s *snapshotStore) close() {
	close(s.stop)
	<-s.done
}

var _ session.Store = (*snapshotStore)(nil)
