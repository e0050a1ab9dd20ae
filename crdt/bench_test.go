package crdt

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

var benchOrigin = Origin{Name: "mcpswarm-1", Epoch: 118927498371465216}

func benchKey(i int) string { return fmt.Sprintf("session-%08d", i) }

// benchValue is a 64-byte record, the size of a small registry value.
func benchValue(i int) []byte { return fmt.Appendf(nil, "%064d", i) }

// benchDelta is one delta of n puts by benchOrigin, over (0, n].
func benchDelta(n int) Delta {
	d := Delta{Origin: benchOrigin, To: uint64(n), Puts: make([]Put, n)}
	for i := range n {
		d.Puts[i] = Put{Key: benchKey(i), Value: benchValue(i), Seq: uint64(i + 1)}
	}
	return d
}

// BenchmarkApply measures Apply per entry: one delta of 1,000 puts into an
// empty partition, and 1,000 one-put deltas in sequence. The baseline is
// storing the same entries, copied, in a Go map.
func BenchmarkApply(b *testing.B) {
	const n = 1000
	batch := benchDelta(n)
	singles := make([]Delta, n)
	for i, p := range batch.Puts {
		singles[i] = Delta{Origin: benchOrigin, From: uint64(i), To: uint64(i + 1), Puts: []Put{p}}
	}
	b.Run("batch1000", func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			m := New(Origin{Name: "r", Epoch: 1}, Config{})
			if _, err := m.Apply(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/entry")
	})
	b.Run("single", func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			m := New(Origin{Name: "r", Epoch: 1}, Config{})
			for _, d := range singles {
				if _, err := m.Apply(d); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/entry")
	})
	b.Run("baseline-gomap", func(b *testing.B) {
		type entry struct {
			value []byte
			seq   uint64
		}
		cpu0 := cpuTime()
		for b.Loop() {
			m := map[string]entry{}
			for _, p := range batch.Puts {
				m[p.Key] = entry{append([]byte(nil), p.Value...), p.Seq}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n), "cpu-ns/entry")
	})
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemoryPerEntry measures the bytes a live entry costs beyond its
// key and value (16-byte keys, 64-byte values), for a remote partition
// filled by a snapshot, at sizes just before (100k) and just after (110k)
// the hash table doubles. The baseline is a Go map[string]struct{value
// []byte; seq uint64} holding copies of the same entries.
func BenchmarkMemoryPerEntry(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 110_000} {
		src := New(benchOrigin, Config{})
		payload := 0
		for i := range n {
			k, v := benchKey(i), benchValue(i)
			payload += len(k) + len(v)
			if _, err := src.Put(k, v); err != nil {
				b.Fatal(err)
			}
		}
		chunks := src.Snapshot(benchOrigin, 1<<20)
		b.Run(fmt.Sprintf("crdt-%d", n), func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := heapAfterGC()
				m := New(Origin{Name: "r", Epoch: 1}, Config{})
				rcv := m.NewSnapshotReceiver(benchOrigin, chunks[0].Seq)
				for _, c := range chunks {
					if err := rcv.Add(c); err != nil {
						b.Fatal(err)
					}
				}
				if ok, err := rcv.Commit(); !ok || err != nil {
					b.Fatal(ok, err)
				}
				rcv = nil
				after := heapAfterGC()
				if m.Len(benchOrigin) != n {
					b.Fatal("entries lost")
				}
				per = (float64(after) - float64(before) - float64(payload)) / float64(n)
				runtime.KeepAlive(m)
			}
			b.ReportMetric(per, "B-meta/entry")
		})
		b.Run(fmt.Sprintf("baseline-gomap-%d", n), func(b *testing.B) {
			type entry struct {
				value []byte
				seq   uint64
			}
			var per float64
			for b.Loop() {
				before := heapAfterGC()
				m := make(map[string]entry)
				for i := range n {
					k := benchKey(i)
					m[k] = entry{benchValue(i), uint64(i + 1)}
				}
				after := heapAfterGC()
				per = (float64(after) - float64(before) - float64(payload)) / float64(n)
				runtime.KeepAlive(m)
			}
			b.ReportMetric(per, "B-meta/entry")
		})
	}
}

// BenchmarkSnapshot100k measures a full catch-up of one 100,000-entry
// origin: Snapshot in 1 MiB chunks at the source, then Add and Commit at
// the receiver.
func BenchmarkSnapshot100k(b *testing.B) {
	const n = 100_000
	src := New(benchOrigin, Config{})
	for i := range n {
		if _, err := src.Put(benchKey(i), benchValue(i)); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := cpuTime()
	for b.Loop() {
		chunks := src.Snapshot(benchOrigin, 1<<20)
		m := New(Origin{Name: "r", Epoch: 1}, Config{})
		rcv := m.NewSnapshotReceiver(benchOrigin, chunks[0].Seq)
		for _, c := range chunks {
			if err := rcv.Add(c); err != nil {
				b.Fatal(err)
			}
		}
		if ok, err := rcv.Commit(); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/snapshot")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/snapshot")
}

// BenchmarkDeltaSince measures catch-up from a full default log (1,024
// one-put deltas) for a peer 1,000 writes behind.
func BenchmarkDeltaSince(b *testing.B) {
	src := New(benchOrigin, Config{})
	for i := range 2048 {
		src.Put(benchKey(i%300), benchValue(i))
	}
	have := src.Seq(benchOrigin) - 1000
	for b.Loop() {
		if _, ok := src.DeltaSince(benchOrigin, have); !ok {
			b.Fatal("log does not reach")
		}
	}
}

// BenchmarkOwnPut is a local write of a 1 KiB registry value overwriting
// one of 500 keys: "copied" adds the copy the delta log made of every
// write before it shared the arena's bytes (the old path's cost), "shared"
// is Put as it is.
func BenchmarkOwnPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	for _, copied := range []bool{true, false} {
		b.Run(map[bool]string{true: "copied", false: "shared"}[copied], func(b *testing.B) {
			m := New(benchOrigin, Config{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d, err := m.Put(benchKey(i%500), value)
				if err != nil {
					b.Fatal(err)
				}
				if copied {
					sink = ownedCopy(d)
				}
				i++
			}
		})
	}
}

var sink Delta

// BenchmarkCountEntries is a registry's size as a metrics scrape reads it
// (cluster.Registry.Len), with 30,000 entries: counted, and by visiting
// every entry through Range as it was read before.
func BenchmarkCountEntries(b *testing.B) {
	m := New(originA, Config{})
	for i := range 30000 {
		if _, err := m.Put(fmt.Sprintf("r:%016d", i), make([]byte, 8)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if m.Count() != 30000 {
				b.Fatal("miscounted")
			}
		}
	})
	b.Run("Range", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			m.Range(func(Entry) bool { n++; return true })
			if n != 30000 {
				b.Fatal("miscounted")
			}
		}
	})
}
