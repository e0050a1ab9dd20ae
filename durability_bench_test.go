package mcpswarm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/journal"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// BenchmarkDurability compares the --durability modes on the node's real
// snapshot store (a journal in a temporary directory on the test's disk)
// under the session manager, with the disk's fsync floor measured in the
// same run:
//
//   - p50/p99 of one derived call (counter inc) at concurrency 1, the
//     modes interleaved call by call so load drifts hit them alike;
//   - throughput at concurrency 16 and 64, each client its own session;
//   - the write-behind bbolt store this replaced ("writebehind"), as the
//     baseline for the process mode.
//
// Ratios (the targets): sync-vs-process+fsync ≤ 1.5,
// sync-c64-vs-fsync-per-call ≥ 5, process-vs-writebehind ≤ 1.15.
func BenchmarkDurability(b *testing.B) {
	dir := b.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	type target struct {
		name  string
		mgr   *session.Manager
		store session.Store
		lat   []time.Duration
	}
	var targets []*target
	for _, name := range []string{"writebehind", "process", "sync"} {
		store, closeStore := benchStore(b, filepath.Join(dir, name), name, quiet)
		reg := session.NewRegistry()
		if err := apps.Register(reg); err != nil {
			b.Fatal(err)
		}
		m, err := session.NewManager(session.ManagerConfig{Registry: reg, Store: store, Logger: quiet, MaxPerPrincipal: 1000})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = m.Close(context.Background())
			closeStore()
		})
		for i := range 64 {
			if _, err := m.Start(context.Background(), fmt.Sprintf("s%d", i), "counter", "p"); err != nil {
				b.Fatal(err)
			}
		}
		targets = append(targets, &target{name: name, mgr: m, store: store})
	}
	ctx := context.Background()
	call := func(m *session.Manager, id string) {
		res, err := m.Call(ctx, id, id+".inc.click", nil)
		if err != nil || res.IsError {
			b.Fatalf("calling %s: %v %s", id, err, res.Text)
		}
	}

	// The floor is sampled in the same loop: the other modes' background
	// fsyncs share the disk with it as they do with the sync mode's.
	floor := newFsyncFloor(b, dir)
	var floorLat []time.Duration
	for b.Loop() {
		for _, t := range targets {
			if t.name == "sync" {
				floorLat = append(floorLat, floor())
			}
			began := time.Now()
			call(t.mgr, "s0")
			t.lat = append(t.lat, time.Since(began))
		}
	}

	fsync := quantile(floorLat, 0.5)
	b.ReportMetric(us(fsync), "fsync-p50-µs")
	p50 := map[string]float64{}
	tput := map[string]float64{}
	for _, t := range targets {
		p50[t.name] = us(quantile(t.lat, 0.5))
		b.ReportMetric(p50[t.name], t.name+"-p50-µs")
		b.ReportMetric(us(quantile(t.lat, 0.99)), t.name+"-p99-µs")
	}
	for _, conc := range []int{16, 64} {
		for _, t := range targets {
			var rounds uint64
			if s, ok := t.store.(*snapshotStore); ok {
				rounds = s.j.Stats().Rounds
			}
			rate, calls := throughput(conc, time.Second, func(i int) { call(t.mgr, fmt.Sprintf("s%d", i)) })
			b.ReportMetric(rate, fmt.Sprintf("%s-c%d-calls/s", t.name, conc))
			if s, ok := t.store.(*snapshotStore); ok && t.name == "sync" {
				// Group commit at work, whatever the CPU left for the
				// calls: how many calls shared each fsync'd commit.
				b.ReportMetric(float64(calls)/float64(s.j.Stats().Rounds-rounds), fmt.Sprintf("sync-c%d-calls/commit", conc))
			}
			if conc == 64 {
				tput[t.name] = rate
			}
		}
	}
	b.ReportMetric(p50["sync"]/(p50["process"]+us(fsync)), "sync-vs-process+fsync")
	b.ReportMetric(tput["sync"]/(1e6/us(fsync)), "sync-c64-vs-fsync-per-call")
	b.ReportMetric(p50["process"]/p50["writebehind"], "process-vs-writebehind")
}

// benchStore opens the store of one mode in dir.
func benchStore(b *testing.B, dir, name string, log *slog.Logger) (session.Store, func()) {
	b.Helper()
	if name == "writebehind" {
		st, err := cluster.OpenBolt(dir, false)
		if err != nil {
			b.Fatal(err)
		}
		s := newWriteBehindStore(st)
		return s, func() { s.close(); _ = st.Close() }
	}
	mode, err := journal.ParseMode(name)
	if err != nil {
		b.Fatal(err)
	}
	st, err := cluster.OpenBolt(dir, false)
	if err != nil {
		b.Fatal(err)
	}
	s, err := openSnapshotStore(dir, mode, st, log)
	if err != nil {
		b.Fatal(err)
	}
	return s, func() { _ = s.close(); _ = st.Close() }
}

// throughput runs conc clients, client i calling fn(i) in a loop, for d,
// and returns the calls per second and the calls made.
func throughput(conc int, d time.Duration, fn func(i int)) (float64, int64) {
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for i := range conc {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				fn(i)
				n.Add(1)
			}
		})
	}
	time.Sleep(d) // the measuring window of a throughput benchmark: nothing to await
	close(stop)
	wg.Wait()
	return float64(n.Load()) / time.Since(began).Seconds(), n.Load()
}

// newFsyncFloor returns a probe that writes 4 KiB to a file in dir, fsyncs
// it and says how long that took: what `dd bs=4k oflag=dsync` measures,
// the least one durable commit costs.
func newFsyncFloor(b *testing.B, dir string) func() time.Duration {
	f, err := os.Create(filepath.Join(dir, "fsync-floor"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	buf := make([]byte, 4096)
	return func() time.Duration {
		began := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		return time.Since(began)
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// writeBehindStore is the snapshot store the journal replaced, kept here
// as the benchmark's baseline: Save hands the snapshot to a writer that
// gathers for 2 ms and then writes each session in its own fsync'd bbolt
// commit, and returns at once.
type writeBehindStore struct {
	st      cluster.Storage
	mu      sync.Mutex
	pending map[string][]byte
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newWriteBehindStore(st cluster.Storage) *writeBehindStore {
	s := &writeBehindStore{st: st, pending: map[string][]byte{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *writeBehindStore) run() {
	defer close(s.done)
	for {
		select {
		case <-s.kick:
			select {
			case <-time.After(2 * time.Millisecond):
			case <-s.stop:
			}
			s.flush()
		case <-s.stop:
			s.flush()
			return
		}
	}
}

func (s *writeBehindStore) flush() {
	s.mu.Lock()
	batch := s.pending
	s.pending = map[string][]byte{}
	s.mu.Unlock()
	for id, b := range batch {
		_ = s.st.Write("snapshots", id, b, func() error { return nil })
	}
}

func (s *writeBehindStore) Save(snap session.Snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pending[snap.Info.ID] = b
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

func (s *writeBehindStore) Delete(id string) error { return nil }

func (s *writeBehindStore) Load() ([]session.Snapshot, error) { return nil, nil }

func (s *writeBehindStore) close() { close(s.stop); <-s.done }
