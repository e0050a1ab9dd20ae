package crdtpb

import (
	"fmt"
	"testing"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
	"google.golang.org/protobuf/proto"
)

// benchOrigin looks like a production origin: a StatefulSet pod name and an
// epoch of unixMillis<<16 | random16 (18 decimal digits).
var benchOrigin = crdt.Origin{Name: "mcpswarm-3", Epoch: 1796000000000<<16 | 0xbeef}

const benchRegistry = "sessions"

// wireDeltas are n one-op deltas (puts of 64-byte values to 16-byte keys,
// or removals of those keys) written after 1,000,000 earlier writes, so
// sequence numbers take realistic varint sizes.
func wireDeltas(tb testing.TB, n int, remove bool) (single crdt.Delta, batch crdt.Delta, payload int) {
	m := crdt.New(benchOrigin, crdt.Config{})
	key := func(i int) string { return fmt.Sprintf("session-%08d", i) }
	for i := range 1_000_000 {
		if _, err := m.Put(key(i%n), fmt.Appendf(nil, "%064d", i)); err != nil {
			tb.Fatal(err)
		}
	}
	var ds []crdt.Delta
	for i := range n {
		var d crdt.Delta
		if remove {
			d, _ = m.Remove(key(i))
			payload += len(key(i))
		} else {
			v := fmt.Appendf(nil, "%064d", i)
			d, _ = m.Put(key(i), v)
			payload += len(key(i)) + len(v)
		}
		ds = append(ds, d)
	}
	batch, err := crdt.MergeAll(ds)
	if err != nil {
		tb.Fatal(err)
	}
	return ds[0], batch, payload
}

// BenchmarkWireBytes reports the protobuf bytes a put or a removal costs
// beyond its key and value, as the Delta message goes on a Replicate
// stream after the stream's first request has declared the origin and the
// registry (StreamEncoder: both are then one-byte refs): alone in a Delta
// ("single"), and amortized over a batch of 100 in one Delta ("batch100").
// The "-text" variants measure the same deltas with the origin and registry
// spelled out in every Delta (EncodeDelta alone), as CatchUp sends them and
// as a stream's first request does.
func BenchmarkWireBytes(b *testing.B) {
	for _, remove := range []bool{false, true} {
		name := "put"
		if remove {
			name = "remove"
		}
		single, batch, payload := wireDeltas(b, 100, remove)
		onePayload := payload / 100
		for _, c := range []struct {
			name    string
			d       crdt.Delta
			n       int
			payload int
		}{{"single", single, 1, onePayload}, {"batch100", batch, 100, payload}} {
			req := &peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{EncodeDelta(benchRegistry, c.d)}}
			b.Run(name+"-"+c.name, func(b *testing.B) {
				var enc StreamEncoder
				if first := enc.Encode(req); len(first.GetOrigins()) != 1 || len(first.GetRegistries()) != 1 {
					b.Fatalf("first request declares %v", first)
				}
				var size int
				for b.Loop() {
					m := enc.Encode(req)
					if len(m.GetOrigins())+len(m.GetRegistries()) > 0 {
						b.Fatal("declared twice")
					}
					size = proto.Size(m.GetDeltas()[0])
				}
				b.ReportMetric(float64(size-c.payload)/float64(c.n), "B-overhead/op")
			})
			b.Run(name+"-"+c.name+"-text", func(b *testing.B) {
				var size int
				for b.Loop() {
					size = proto.Size(EncodeDelta(benchRegistry, c.d))
				}
				b.ReportMetric(float64(size-c.payload)/float64(c.n), "B-overhead/op")
			})
		}
	}
}

// BenchmarkDigestBytes reports the protobuf bytes of a digest per origin,
// for 50 origins of production shape at seq ~1,000,000.
func BenchmarkDigestBytes(b *testing.B) {
	const n = 50
	vs := make([]crdt.Version, n)
	for i := range vs {
		vs[i] = crdt.Version{Origin: crdt.Origin{Name: fmt.Sprintf("mcpswarm-%d", i), Epoch: 1796000000000<<16 | uint64(i)*7919}, Seq: 1_000_000 + uint64(i)}
	}
	empty := proto.Size(EncodeDigest(benchRegistry, nil))
	var size int
	for b.Loop() {
		size = proto.Size(EncodeDigest(benchRegistry, vs))
	}
	b.ReportMetric(float64(size-empty)/n, "B/origin")
}

// BenchmarkDecodeDelta measures decoding a 100-put delta from bytes
// (proto.Unmarshal plus DecodeDelta's checks), per entry.
func BenchmarkDecodeDelta(b *testing.B) {
	_, batch, _ := wireDeltas(b, 100, false)
	raw, err := proto.Marshal(EncodeDelta(benchRegistry, batch))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var m peerv1.Delta
		if err := proto.Unmarshal(raw, &m); err != nil {
			b.Fatal(err)
		}
		if _, _, err := DecodeDelta(&m, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/entry")
}
