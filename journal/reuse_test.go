package journal

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// bytesPerPut measures the heap bytes one Put of value allocates, over n
// sequential Puts to a few keys.
func bytesPerPut(t testing.TB, j *Journal, value []byte, n int) float64 {
	t.Helper()
	if err := j.Put("warm", value); err != nil { // the first round grows the spare
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		if err := j.Put(keys[i%len(keys)], value); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

var keys = []string{"s0", "s1", "s2", "s3"}

// TestPutReusesRoundBuffers holds the journal to reusing its write
// buffers: a Put of a 4 KiB snapshot allocates a fraction of the record,
// not a fresh buffer of its size (it did, in both modes, before reuse).
func TestPutReusesRoundBuffers(t *testing.T) {
	value := bytes.Repeat([]byte{'x'}, 4096)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			j := open(t, t.TempDir(), mode)
			defer j.Close()
			got := bytesPerPut(t, j, value, 200)
			if got > float64(len(value))/4 {
				t.Errorf("a Put of %d bytes allocated %.0f bytes: its buffer was not reused", len(value), got)
			}
			t.Logf("%s: %.0f bytes allocated per Put of %d bytes", mode, got, len(value))
		})
	}
}

// TestReusedBuffersKeepEveryRecord writes concurrently in Sync mode, where
// rounds of different sizes pass their buffer on, and checks every key's
// last value survives a reopen byte for byte: a reused buffer never leaks
// one round's bytes into another's records.
func TestReusedBuffersKeepEveryRecord(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir, mode)
			const writers, puts = 8, 60
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range puts {
						v := bytes.Repeat([]byte{byte('a' + w)}, 1+(i*97+w*31)%3000)
						v = fmt.Appendf(v, "|%d", i)
						if err := j.Put(fmt.Sprintf("w%d", w), v); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			j = open(t, dir, mode)
			defer j.Close()
			got := contents(t, j)
			for w := range writers {
				i := puts - 1
				want := string(fmt.Appendf(bytes.Repeat([]byte{byte('a' + w)}, 1+(i*97+w*31)%3000), "|%d", i))
				if g := got[fmt.Sprintf("w%d", w)]; g != want {
					t.Errorf("w%d: got %d bytes %.20q…, want %d bytes %.20q…", w, len(g), g, len(want), want)
				}
			}
		})
	}
}

// BenchmarkPut is one Put of a counter-sized snapshot (1 KiB) from 16
// concurrent writers, the shape of the 16-client click load.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte{'x'}, 1024)
	for _, mode := range modes {
		b.Run(mode.String(), func(b *testing.B) {
			j, err := Open(b.TempDir(), Options{Mode: mode, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			b.SetParallelism(8) // 16 writers on 2 cores
			b.ReportAllocs()
			var next sync.Mutex
			w := 0
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				next.Lock()
				key := fmt.Sprintf("s%d", w)
				w++
				next.Unlock()
				for pb.Next() {
					if err := j.Put(key, value); err != nil {
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
