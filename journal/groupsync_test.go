package journal

import (
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// syncLedger is a stand-in fsync that records what each fsync covers: the
// records the file held when it began (fdatasync covers at least every
// write that returned before it was called), made durable when it ends.
type syncLedger struct {
	mu      sync.Mutex
	durable map[string]int // key -> the highest value a finished fsync covered
	calls   int
}

func (l *syncLedger) fsync(f *os.File) error {
	covered := map[string]int{}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	for len(b) >= headerSize && !allZero(b[:headerSize]) {
		rec, n, err := decode(b)
		if err != nil {
			break // a round still being written: it is not covered
		}
		if v, err := strconv.Atoi(string(rec.value)); err == nil && !rec.del {
			covered[rec.key] = max(covered[rec.key], v)
		}
		b = b[n:]
	}
	if err := datasync(f); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	for k, v := range covered {
		l.durable[k] = max(l.durable[k], v)
	}
	return nil
}

// fsyncs reports how many fsyncs the journal asked for.
func (l *syncLedger) fsyncs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// openLedgered opens a Process-mode journal whose fsyncs a ledger records.
func openLedgered(t *testing.T) (*Journal, *syncLedger) {
	t.Helper()
	ledger := &syncLedger{durable: map[string]int{}}
	j, err := Open(t.TempDir(), Options{Mode: Process, Logger: quiet, CompactMin: 32 << 10, fsync: ledger.fsync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, ledger
}

func (l *syncLedger) covers(key string, v int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable[key] >= v
}

// Concurrent Process-mode writers that each ask for Sync durability (a
// replicated write no standby holds) share fsyncs, and every Sync that
// returns has had its own write covered by an fsync that finished: the
// group commit answers no caller before its write is on disk.
func TestConcurrentSyncsShareFsyncsAndCoverEveryWrite(t *testing.T) {
	j, ledger := openLedgered(t)
	const writers, each = 16, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("w%d", w)
			for i := 1; i <= each; i++ {
				if err := j.Put(key, []byte(strconv.Itoa(i))); err != nil {
					t.Error(err)
					return
				}
				if err := j.Sync(); err != nil {
					t.Error(err)
					return
				}
				if !ledger.covers(key, i) {
					t.Errorf("Sync returned before an fsync covered %s = %d", key, i)
					return
				}
			}
		})
	}
	wg.Wait()
	calls := ledger.fsyncs()
	if calls >= writers*each {
		t.Errorf("%d fsyncs for %d Syncs: they are not shared", calls, writers*each)
	}
	t.Logf("%d Syncs served by %d fsyncs", writers*each, calls)
}

// PutSynced in a Process-mode journal (the write of a session no standby
// can hold) returns only once a finished fsync covered its record, and
// concurrent ones share fsyncs, as Sync mode's rounds do; Process writes
// beside them keep their own durability.
func TestPutSyncedIsOnDiskBeforeItReturns(t *testing.T) {
	j, ledger := openLedgered(t)
	const writers, each = 16, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			key := fmt.Sprintf("w%d", w)
			for i := 1; i <= each; i++ {
				if w%4 == 3 { // a Process writer among them
					if err := j.Put(key, []byte(strconv.Itoa(i))); err != nil {
						t.Error(err)
					}
					continue
				}
				if err := j.PutSynced(key, []byte(strconv.Itoa(i))); err != nil {
					t.Error(err)
					return
				}
				if !ledger.covers(key, i) {
					t.Errorf("PutSynced returned before an fsync covered %s = %d", key, i)
					return
				}
			}
		})
	}
	wg.Wait()
	calls := ledger.fsyncs()
	synced := writers * each * 3 / 4
	if calls >= synced {
		t.Errorf("%d fsyncs for %d PutSynced: they are not shared", calls, synced)
	}
	t.Logf("%d PutSynced served by %d fsyncs", synced, calls)
}

// A compaction holds the lead of the journal's rounds, not its lock: while
// its copy is on disk, Stats answers, a Process-mode Sync fsyncs what was
// written, and a writer joins the next round, which commits once the
// compaction ends. Nothing written is lost across it.
func TestACompactionLeavesTheLockFree(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			compacting, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			fsync := func(f *os.File) error {
				if strings.HasSuffix(f.Name(), ".tmp") {
					once.Do(func() { close(compacting); <-release })
				}
				return datasync(f)
			}
			dir := t.TempDir()
			j, err := Open(dir, Options{Mode: mode, Logger: quiet, CompactMin: 8 << 10, fsync: fsync})
			if err != nil {
				t.Fatal(err)
			}
			big := make([]byte, 1<<10)
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-compacting:
						return
					default:
					}
					if err := j.Put("big", big); err != nil {
						t.Error(err)
						return
					}
				}
			})
			<-compacting
			finishes(t, "Stats waited for a compaction", func() { _ = j.Stats() })
			if mode == Process {
				finishes(t, "Sync waited for a compaction", func() {
					if err := j.Sync(); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Go(func() {
				if err := j.Put("late", []byte("1")); err != nil {
					t.Error(err)
				}
			})
			close(release)
			wg.Wait()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			j = open(t, dir, mode)
			defer j.Close()
			got := contents(t, j)
			if got["late"] != "1" || got["big"] != string(big) {
				t.Fatalf("after the compaction: %d keys, late = %q", len(got), got["late"])
			}
			if st := j.Stats(); st.Size > 4<<10 {
				t.Errorf("file %d bytes for %d live: the compaction did not take", st.Size, st.Live)
			}
		})
	}
}

// BenchmarkPutThenSync is a Process-mode Put of a counter-sized snapshot
// followed by Sync, from 16 concurrent writers: the click of a lone node
// in the default durability (replica, with no standby to hold the write).
func BenchmarkPutThenSync(b *testing.B) {
	value := make([]byte, 1024)
	j, err := Open(b.TempDir(), Options{Mode: Process, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	b.SetParallelism(8) // 16 writers on 2 cores
	var next atomic.Int64
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("s%d", next.Add(1))
		for pb.Next() {
			if err := j.Put(key, value); err != nil {
				b.Error(err)
				return
			}
			if err := j.Sync(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := j.Stats()
	b.ReportMetric(float64(st.Records)/float64(max(st.Rounds, 1)), "writes/fsync")
}

// BenchmarkDurableClick is BenchmarkPutThenSync with the rest of a click
// between writes: each of 16 writers spends about 60 µs of CPU (a
// checksum loop) before every Put and Sync, as a node spends on a click's
// HTTP, session and render work, so writes arrive spread out as they do
// under the click load instead of all at once. Its cpu-µs/op less the
// busy work is what the durable write costs a click.
func BenchmarkDurableClick(b *testing.B) {
	value := make([]byte, 1300)
	work := make([]byte, 64<<10)
	for _, mode := range modes {
		b.Run(mode.String(), func(b *testing.B) {
			j, err := Open(b.TempDir(), Options{Mode: mode, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			b.SetParallelism(8) // 16 writers on 2 cores
			var next atomic.Int64
			var sink atomic.Uint32
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("s%d", next.Add(1))
				for pb.Next() {
					for range 8 {
						sink.Add(crc32.ChecksumIEEE(work))
					}
					if err := j.Put(key, value); err != nil {
						b.Error(err)
						return
					}
					if err := j.Sync(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			st := j.Stats()
			b.ReportMetric(float64(st.Records)/float64(max(st.Rounds, 1)), "writes/fsync")
		})
	}
}
