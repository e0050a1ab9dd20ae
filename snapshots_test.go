package mcpswarm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/journal"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
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

// The store encodes every snapshot into a reused buffer: concurrent saves
// of snapshots of different sizes, in both durability modes, each come
// back from the journal as encoded (a buffer reused too early would mix
// them).
func TestPooledSnapshotBuffersKeepEverySave(t *testing.T) {
	for _, mode := range []journal.Mode{journal.Sync, journal.Process} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			st, err := cluster.OpenBolt(dir, true)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s, err := openSnapshotStore(dir, mode, st, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range 40 {
						id := fmt.Sprintf("w%di%d", w, i%5)
						model := fmt.Sprintf(`{"text":%q}`, strings.Repeat(string(rune('a'+w)), (i*37+w*101)%3000))
						snap := session.Snapshot{Info: session.Info{ID: id, App: "counter", Principal: "p"}, Model: json.RawMessage(model)}
						b, err := snap.MarshalJSON()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock() // saves of one id come from one writer, in order
						want[id] = string(b)
						mu.Unlock()
						if err := s.Save(snap); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			j, err := journal.Open(filepath.Join(dir, snapshotDir), journal.Options{Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			got := map[string]string{}
			if err := j.Load(func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d snapshots stored, want %d", len(got), len(want))
			}
			for id, w := range want {
				if got[id] != w {
					t.Errorf("%s: stored %.80s…, saved %.80s…", id, got[id], w)
				}
			}
		})
	}
}

// freshStore saves as the store did before its buffers were pooled: a new
// buffer per save.
type freshStore struct{ *snapshotStore }

func (f freshStore) Save(snap session.Snapshot) error {
	b, err := snap.MarshalJSON()
	if err != nil {
		return err
	}
	return f.j.Put(snap.Info.ID, b)
}

// BenchmarkSnapshotSave is a counter click through the session manager
// saving to the journal (Process mode, so the fsync does not hide the
// encoding): "fresh" is the old save, a new buffer per snapshot,
// "pooled" the store's Save.
func BenchmarkSnapshotSave(b *testing.B) {
	for _, pooled := range []bool{false, true} {
		name := map[bool]string{false: "fresh", true: "pooled"}[pooled]
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			st, err := cluster.OpenBolt(dir, true)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s, err := openSnapshotStore(dir, journal.Process, st, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			var store session.Store = freshStore{s}
			if pooled {
				store = s
			}
			reg := session.NewRegistry()
			if err := apps.Register(reg); err != nil {
				b.Fatal(err)
			}
			m, err := session.NewManager(session.ManagerConfig{Registry: reg, Store: store, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			ctx := context.Background()
			if _, err := m.Start(ctx, "c", "counter", "p"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := m.Call(ctx, "c", "c.inc.click", nil); err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}
