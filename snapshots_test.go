package mcpswarm

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/journal"
	"github.com/mcpswarm/mcpswarm/session"
)

// A data dir written by a node that kept snapshots in bbolt: the new node
// moves them into the journal, restores them, and leaves none in bbolt.
func TestSnapshotsMoveFromBboltToTheJournal(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := cluster.OpenBolt(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"a", "b"} {
		b, _ := json.Marshal(session.Snapshot{Info: session.Info{ID: id, App: "counter", Principal: "p"}, Model: json.RawMessage(`{"count":7}`)})
		if err := st.Write(legacyBucket, id, b, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	s, err := openSnapshotStore(dir, journal.Process, st, log)
	if err != nil {
		t.Fatal(err)
	}
	// A later update in the journal wins over a leftover in bbolt.
	if err := s.Save(session.Snapshot{Info: session.Info{ID: "a", App: "counter", Principal: "p"}, Model: json.RawMessage(`{"count":8}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	left := 0
	_ = st.Load(legacyBucket, func(string, []byte) error { left++; return nil })
	if left != 0 {
		t.Fatalf("%d snapshots left in bbolt", left)
	}
	s, err = openSnapshotStore(dir, journal.Sync, st, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	snaps, err := s.Load()
	if err != nil || len(snaps) != 2 {
		t.Fatalf("loaded %v, %v", snaps, err)
	}
	if string(snaps[0].Model) != `{"count":8}` || string(snaps[1].Model) != `{"count":7}` {
		t.Fatalf("models %s %s", snaps[0].Model, snaps[1].Model)
	}
}
