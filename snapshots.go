package mcpswarm

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/journal"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/prometheus/client_golang/prometheus"
)

// snapshotDir is where the node keeps its session snapshots, under the
// data dir. Models stay on their owner; other nodes see only the session
// and tool records.
const snapshotDir = "snapshots"

// legacyBucket is the bbolt bucket older nodes kept snapshots in; a node
// moves what it finds there into the journal at start.
const legacyBucket = "snapshots"

// snapshotStore keeps session snapshots in a journal, so a restarted owner
// restores its sessions with their models. Save returns when the snapshot
// is as durable as the node's --durability promises (see package journal):
// the session manager answers a call only after that.
type snapshotStore struct {
	j   *journal.Journal
	log *slog.Logger
	// rep ships each saved snapshot to the session's standbys before Save
	// returns; nil keeps the one copy.
	rep *replicas
	// bufs holds encoding buffers (*[]byte): the journal copies a value
	// before Put returns, so a snapshot's bytes are dead once saved (a
	// fresh buffer per click was 5% of a click's allocated bytes).
	bufs sync.Pool
}

// maxPooledSnapshot bounds the buffers kept for reuse, so one large
// snapshot does not stay pinned.
const maxPooledSnapshot = 64 << 10

// openSnapshotStore opens the journal under dataDir and moves any
// snapshots an older node left in the bbolt file into it.
func openSnapshotStore(dataDir string, mode journal.Mode, legacy cluster.Storage, log *slog.Logger) (*snapshotStore, error) {
	dir := filepath.Join(dataDir, snapshotDir)
	if err := migrateSnapshots(dir, legacy, log); err != nil {
		return nil, err
	}
	j, err := journal.Open(dir, journal.Options{Mode: mode, Logger: log})
	if err != nil {
		return nil, err
	}
	return &snapshotStore{j: j, log: log}, nil
}

// migrateSnapshots copies the bbolt bucket's snapshots into the journal
// (fsync'd) and only then deletes them from bbolt; a journal entry, being
// newer, wins over a leftover bbolt one after an interrupted migration.
func migrateSnapshots(dir string, legacy cluster.Storage, log *slog.Logger) error {
	old := map[string][]byte{}
	if err := legacy.Load(legacyBucket, func(k string, v []byte) error { old[k] = v; return nil }); err != nil {
		return fmt.Errorf("reading snapshots from the bbolt file: %w", err)
	}
	if len(old) == 0 {
		return nil
	}
	j, err := journal.Open(dir, journal.Options{Mode: journal.Sync, Logger: log})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	err = j.Load(func(k string, _ []byte) error { have[k] = true; return nil })
	for k, v := range old {
		if err == nil && !have[k] {
			err = j.Put(k, v)
		}
	}
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("moving snapshots from the bbolt file to %s: %w", dir, err)
	}
	for k := range old {
		if err := legacy.Write(legacyBucket, k, nil, func() error { return nil }); err != nil {
			return fmt.Errorf("deleting moved snapshot %s from the bbolt file: %w", k, err)
		}
	}
	log.Info("moved session snapshots from the bbolt file to the journal", "sessions", len(old), "dir", dir)
	return nil
}

// Save implements session.Store.
func (s *snapshotStore) Save(snap session.Snapshot) error {
	// MarshalJSON's bytes are already compact: json.Marshal would only
	// copy and re-scan them (most of a snapshot's encoding cost).
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b, err := snap.AppendJSON((*bp)[:0])
	if err == nil {
		// With no member to stand by (a lone node), the write will be
		// answered on this node's fsync: it goes to disk in one group
		// commit of write and fdatasync, not a write(2) and then a Sync
		// of its own.
		synced := s.rep != nil && s.rep.alone()
		if synced {
			err = s.j.PutSynced(snap.Info.ID, b)
		} else {
			err = s.j.Put(snap.Info.ID, b)
		}
		if err == nil && s.rep != nil {
			if err = s.rep.replicate(snap.Info.ID, snap.Info.Handoff, b, s.j, synced); err != nil {
				err = notReplicated{err}
			}
		}
	} else {
		err = fmt.Errorf("encoding snapshot of %s: %w", snap.Info.ID, err)
	}
	if cap(b) <= maxPooledSnapshot {
		*bp = b
		s.bufs.Put(bp)
	}
	return err
}

// notReplicated marks a refusal by the standbys as session.ErrNotReplicated
// (not the tool's fault: it does not count toward its circuit breaker)
// without changing its text.
type notReplicated struct{ error }

func (e notReplicated) Unwrap() []error { return []error{e.error, session.ErrNotReplicated} }

// Delete implements session.Store.
func (s *snapshotStore) Delete(id string) error {
	if s.rep != nil {
		s.rep.forget(id)
	}
	return s.j.Delete(id)
}

// Load implements session.Store. A snapshot that does not decode is
// logged and skipped, so one bad entry does not keep the others down.
func (s *snapshotStore) Load() ([]session.Snapshot, error) {
	var out []session.Snapshot
	err := s.j.Load(func(key string, value []byte) error {
		var snap session.Snapshot
		if err := json.Unmarshal(value, &snap); err != nil {
			s.log.Error("skipping a session snapshot that does not decode", "session", key, "err", err)
			return nil
		}
		out = append(out, snap)
		if s.rep != nil {
			s.rep.prime(key, snap.Info.Handoff, value)
		}
		return nil
	})
	return out, err
}

// close commits what is pending and closes the journal.
func (s *snapshotStore) close() error { return s.j.Close() }

var _ session.Store = (*snapshotStore)(nil)

// registerJournalMetrics exports the snapshot journal's group commits:
// syncs and the records they made durable, whose ratio is the commit's
// group size (what a sync costs each call under load). store returns the
// open store, or nil before the node's sessions start.
func registerJournalMetrics(reg prometheus.Registerer, store func() *snapshotStore) {
	stat := func(pick func(journal.Stats) uint64) func() float64 {
		return func() float64 {
			s := store()
			if s == nil {
				return 0
			}
			return float64(pick(s.j.Stats()))
		}
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mcpswarm_journal_syncs_total",
			Help: "Syncs (fdatasync) of session snapshot records since the journal opened: group commits with --durability sync.",
		}, stat(func(st journal.Stats) uint64 { return st.Rounds })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "mcpswarm_journal_records_total",
			Help: "Session snapshot records (puts and deletes) written to the journal since it opened; divided by mcpswarm_journal_syncs_total, the group commit's size.",
		}, stat(func(st journal.Stats) uint64 { return st.Records })),
	)
}
