package journal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(t *testing.T, dir string, mode Mode) *Journal {
	t.Helper()
	j, err := Open(dir, Options{Mode: mode, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func contents(t *testing.T, j *Journal) map[string]string {
	t.Helper()
	got := map[string]string{}
	if err := j.Load(func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

var modes = []Mode{Sync, Process}

func TestPutDeleteReopen(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir, mode)
			want := map[string]string{}
			for i := range 50 {
				k := fmt.Sprintf("s%d", i%7)
				v := fmt.Sprintf("v%d", i)
				if err := j.Put(k, []byte(v)); err != nil {
					t.Fatal(err)
				}
				want[k] = v
			}
			if err := j.Delete("s3"); err != nil {
				t.Fatal(err)
			}
			delete(want, "s3")
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if err := j.Put("late", nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Put after Close: %v", err)
			}
			j = open(t, dir, mode)
			defer j.Close()
			if got := contents(t, j); !maps.Equal(got, want) {
				t.Fatalf("reopened: %v, want %v", got, want)
			}
		})
	}
}

// The torn-tail test: the file is cut at every offset of its last record
// (as a crash in the middle of a write would leave it). Reopening keeps
// every earlier record, drops the cut one, and accepts new writes after it.
func TestTornTailAtEveryOffset(t *testing.T) {
	src := t.TempDir()
	j := open(t, src, Sync)
	want := map[string]string{}
	for i := range 20 {
		k, v := fmt.Sprintf("s%d", i%5), fmt.Sprintf("value-%d-%s", i, string(make([]byte, i*3)))
		if err := j.Put(k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	before := j.Stats().Size
	last := "a newer value of s2 that is the last record"
	if err := j.Put("s2", []byte(last)); err != nil {
		t.Fatal(err)
	}
	full := j.Stats().Size
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(src, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != full {
		t.Fatalf("file is %d bytes, journal said %d", len(data), full)
	}
	withLast := maps.Clone(want)
	withLast["s2"] = last
	for cut := before; cut <= full; cut++ {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := Open(dir, Options{Logger: quiet})
		if err != nil {
			t.Fatalf("cut at %d: refused: %v", cut, err)
		}
		exp := want
		if cut == full {
			exp = withLast
		}
		if got := contents(t, j); !maps.Equal(got, exp) {
			t.Fatalf("cut at %d of %d..%d: got %v, want %v", cut, before, full, got, exp)
		}
		if err := j.Put("after", []byte("x")); err != nil {
			t.Fatalf("cut at %d: write after reopen: %v", cut, err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j = open(t, dir, Sync)
		got := contents(t, j)
		_ = j.Close()
		if got["after"] != "x" || got["s0"] != exp["s0"] {
			t.Fatalf("cut at %d: after a write and a reopen: %v", cut, got)
		}
	}
}

// A corrupt byte inside the last record is a torn tail too; one in an
// earlier record cuts the file there, which the warning reports.
func TestCorruptLastRecordIsCutOff(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Sync)
	_ = j.Put("a", []byte("1"))
	_ = j.Put("b", []byte("2"))
	_ = j.Close()
	path := filepath.Join(dir, segmentName(1))
	data, _ := os.ReadFile(path)
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir, Sync)
	defer j.Close()
	if got := contents(t, j); !maps.Equal(got, map[string]string{"a": "1"}) {
		t.Fatalf("got %v", got)
	}
}

// Concurrent writers in Sync mode share fsyncs: there are fewer rounds
// than writes, and every write is on disk when its Put returns.
func TestSyncGroupCommit(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Sync)
	const writers, each = 32, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := j.Put(fmt.Sprintf("w%d", w), fmt.Appendf(nil, "%d", i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := j.Stats()
	if st.Rounds >= writers*each {
		t.Errorf("%d rounds for %d writes: no group commit", st.Rounds, writers*each)
	}
	if st.Records != writers*each {
		t.Errorf("Stats counts %d records for %d writes", st.Records, writers*each)
	}
	t.Logf("%d writes in %d rounds", writers*each, st.Rounds)
	_ = j.Close()
	j = open(t, dir, Sync)
	defer j.Close()
	got := contents(t, j)
	for w := range writers {
		if got[fmt.Sprintf("w%d", w)] != fmt.Sprint(each-1) {
			t.Fatalf("w%d = %q", w, got[fmt.Sprintf("w%d", w)])
		}
	}
}

// Space is freed: rewriting and deleting keys compacts the file back to
// about its live bytes, and the compacted file reopens to the same values.
func TestCompactionBoundsTheFile(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			j, err := Open(dir, Options{Mode: mode, Logger: quiet, CompactMin: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			big := make([]byte, 4<<10)
			want := map[string]string{}
			for i := range 400 {
				k := fmt.Sprintf("s%d", i%40)
				if err := j.Put(k, big); err != nil {
					t.Fatal(err)
				}
				want[k] = string(big)
			}
			for i := range 36 {
				_ = j.Delete(fmt.Sprintf("s%d", i))
				delete(want, fmt.Sprintf("s%d", i))
			}
			_ = j.Put("small", []byte("x")) // one more round, to run the compaction check after the deletes
			want["small"] = "x"
			_ = j.Close()
			j = open(t, dir, mode)
			defer j.Close()
			st := j.Stats()
			if st.Size > 2*st.Live+64<<10 {
				t.Errorf("file %d bytes for %d live bytes: not compacted", st.Size, st.Live)
			}
			if got := contents(t, j); !maps.Equal(got, want) {
				t.Errorf("after compaction: %d keys, want %d", len(got), len(want))
			}
			t.Logf("wrote %d KiB, file now %d KiB for %d KiB live", 400*4, st.Size>>10, st.Live>>10)
		})
	}
}

// A compaction interrupted before its rename leaves a .tmp (ignored); one
// interrupted after it leaves the old segment too (the newest wins).
func TestInterruptedCompaction(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Sync)
	_ = j.Put("a", []byte("old"))
	_ = j.Close()
	old, _ := os.ReadFile(filepath.Join(dir, segmentName(1)))
	// After the rename: segment 2 holds the compacted state, 1 lingers.
	j2 := t.TempDir()
	k := open(t, j2, Sync)
	_ = k.Put("a", []byte("new"))
	_ = k.Close()
	compacted, _ := os.ReadFile(filepath.Join(j2, segmentName(1)))
	_ = os.WriteFile(filepath.Join(dir, segmentName(2)), compacted, 0o600)
	_ = os.WriteFile(filepath.Join(dir, segmentName(3)+".tmp"), old[:len(old)/2], 0o600)
	j = open(t, dir, Sync)
	defer j.Close()
	if got := contents(t, j); got["a"] != "new" {
		t.Fatalf("got %v", got)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 || des[0].Name() != segmentName(2) {
		t.Fatalf("files left: %v", des)
	}
}

// A Process-mode caller that must answer with Sync durability this once
// (a replicated write no standby acknowledged) gets its fsync at once, not
// at the next background round.
func TestSyncFsyncsProcessWritesAtOnce(t *testing.T) {
	j, err := Open(t.TempDir(), Options{Mode: Process, RoundDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Put("a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	before := j.Stats().Rounds
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := j.Stats().Rounds; got != before+1 {
		t.Fatalf("Sync made %d fsync rounds, want 1", got-before)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := j.Stats().Rounds; got != before+1 {
		t.Fatalf("a Sync with nothing written fsynced again (%d rounds)", got-before)
	}
}
