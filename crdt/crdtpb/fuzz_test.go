package crdtpb

import (
	"reflect"
	"testing"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
	"google.golang.org/protobuf/proto"
)

// fuzzLimits are small so the fuzzer reaches every bound quickly.
var fuzzLimits = Limits{MaxKeyLen: 16, MaxValueLen: 64, MaxEntries: 8, MaxVersions: 8}

var fuzzSelf = crdt.Origin{Name: "fuzz-self", Epoch: 1}

// FuzzDecodeDelta feeds arbitrary bytes through proto.Unmarshal and
// DecodeDelta. Whatever decodes must be accepted by Apply (the decoder is at
// least as strict as the map), apply idempotently, and survive a re-encode
// unchanged.
func FuzzDecodeDelta(f *testing.F) {
	for _, b := range deltaSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m peerv1.Delta
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		reg, d, err := DecodeDelta(&m, fuzzLimits)
		if err != nil {
			if reg != "" || !reflect.DeepEqual(d, crdt.Delta{}) {
				t.Fatalf("error %v returned data %q %+v", err, reg, d)
			}
			return
		}
		if n := len(d.Puts) + len(d.Removes); n > fuzzLimits.MaxEntries {
			t.Fatalf("%d entries decoded past the limit", n)
		}
		reg2, d2, err := DecodeDelta(roundTrip(t, EncodeDelta(reg, d)), fuzzLimits)
		if err != nil || reg2 != reg || !reflect.DeepEqual(d2, d) {
			t.Fatalf("re-encode changed %q %+v into %q %+v (%v)", reg, d, reg2, d2, err)
		}
		if d.Origin.Name == fuzzSelf.Name {
			return
		}
		mp := crdt.New(fuzzSelf, crdt.Config{MaxKeyLen: fuzzLimits.MaxKeyLen, MaxValueLen: fuzzLimits.MaxValueLen})
		res, err := mp.Apply(d)
		if err != nil {
			t.Fatalf("decoded delta %+v rejected by Apply: %v", d, err)
		}
		before := mp.Digest()
		again, err := mp.Apply(d)
		if err != nil || again.Applied || again.Have != res.Have || !reflect.DeepEqual(mp.Digest(), before) {
			t.Fatalf("second Apply: %+v %v after %+v", again, err, res)
		}
	})
}

// FuzzDecodeDigest feeds arbitrary bytes through proto.Unmarshal and
// DecodeDigest; whatever decodes lists each node once, survives a
// re-encode, and can be compared with Missing.
func FuzzDecodeDigest(f *testing.F) {
	for _, b := range digestSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m peerv1.Digest
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		reg, vs, err := DecodeDigest(&m, fuzzLimits)
		if err != nil {
			if reg != "" || vs != nil {
				t.Fatalf("error %v returned data", err)
			}
			return
		}
		names := map[string]bool{}
		for _, v := range vs {
			if names[v.Origin.Name] || !v.Origin.Valid() {
				t.Fatalf("digest %v: bad or repeated origin %v", vs, v.Origin)
			}
			names[v.Origin.Name] = true
		}
		reg2, vs2, err := DecodeDigest(roundTrip(t, EncodeDigest(reg, vs)), fuzzLimits)
		if err != nil || reg2 != reg || !reflect.DeepEqual(vs2, vs) {
			t.Fatalf("re-encode changed %v into %v (%v)", vs, vs2, err)
		}
		mp := crdt.New(fuzzSelf, crdt.Config{})
		mp.Put("k", nil)
		for _, miss := range mp.Missing(vs) {
			if miss.Origin != fuzzSelf {
				t.Fatalf("Missing(%v) = %v", vs, miss)
			}
		}
	})
}

// FuzzDecodeSnapshotChunk feeds arbitrary bytes through proto.Unmarshal and
// DecodeSnapshotChunk; whatever decodes survives a re-encode and, as a
// first chunk, is accepted and committed by a SnapshotReceiver.
func FuzzDecodeSnapshotChunk(f *testing.F) {
	for _, b := range chunkSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m peerv1.SnapshotChunk
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		reg, c, err := DecodeSnapshotChunk(&m, fuzzLimits)
		if err != nil {
			if reg != "" || !reflect.DeepEqual(c, crdt.SnapshotChunk{}) {
				t.Fatalf("error %v returned data", err)
			}
			return
		}
		reg2, c2, err := DecodeSnapshotChunk(roundTrip(t, EncodeSnapshotChunk(reg, c)), fuzzLimits)
		if err != nil || reg2 != reg || !reflect.DeepEqual(c2, c) {
			t.Fatalf("re-encode changed %+v into %+v (%v)", c, c2, err)
		}
		if c.Index != 0 || c.Origin.Name == fuzzSelf.Name {
			return
		}
		mp := crdt.New(fuzzSelf, crdt.Config{MaxKeyLen: fuzzLimits.MaxKeyLen, MaxValueLen: fuzzLimits.MaxValueLen})
		rcv := mp.NewSnapshotReceiver(c.Origin, c.Seq)
		if err := rcv.Add(c); err != nil {
			t.Fatalf("decoded chunk %+v rejected: %v", c, err)
		}
		if !c.Last {
			return
		}
		ok, err := rcv.Commit()
		if err != nil || ok != (c.Seq > 0) || mp.Seq(c.Origin) != c.Seq || mp.Len(c.Origin) != len(c.Entries) {
			t.Fatalf("commit of %+v: %v %v, seq %d len %d", c, ok, err, mp.Seq(c.Origin), mp.Len(c.Origin))
		}
	})
}

// FuzzResolveStream feeds arbitrary bytes, as two requests of one
// Replicate stream, through a StreamDecoder. A refused request is left
// unchanged; an accepted one carries no refs, and sending its deltas again
// through a fresh StreamEncoder and StreamDecoder gives them back.
func FuzzResolveStream(f *testing.F) {
	for _, s := range streamSeeds(f) {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var dec StreamDecoder
		for _, b := range [][]byte{first, second} {
			var m peerv1.ReplicateRequest
			if proto.Unmarshal(b, &m) != nil {
				return
			}
			before := proto.Clone(&m)
			if err := dec.Resolve(&m); err != nil {
				if !proto.Equal(&m, before) {
					t.Fatalf("refused request changed: %v", err)
				}
				if n := len(dec.origins) + len(dec.registries); n > MaxStreamDecls {
					t.Fatalf("%d declarations recorded", n)
				}
				return
			}
			for _, d := range m.GetDeltas() {
				if d.GetOriginRef() != 0 || d.GetRegistryRef() != 0 {
					t.Fatalf("resolved delta keeps a ref: %v", d)
				}
			}
			m.Origins, m.Registries = nil, nil
			var enc StreamEncoder
			var dec2 StreamDecoder
			again := roundTrip(t, enc.Encode(&m))
			if err := dec2.Resolve(again); err != nil {
				t.Fatalf("re-encoded request refused: %v", err)
			}
			if !sameDeltas(again, &m) {
				t.Fatalf("re-encode changed\n%v\ninto\n%v", &m, again)
			}
		}
	})
}

// sameDeltas compares the sender and the deltas' fields of two requests
// (not unknown fields, which a StreamEncoder drops from deltas).
func sameDeltas(a, b *peerv1.ReplicateRequest) bool {
	if a.GetSender() != b.GetSender() || len(a.GetDeltas()) != len(b.GetDeltas()) {
		return false
	}
	for i, x := range a.GetDeltas() {
		y := b.GetDeltas()[i]
		if x.GetRegistry() != y.GetRegistry() || x.GetRegistryRef() != y.GetRegistryRef() ||
			x.GetOriginName() != y.GetOriginName() || x.GetOriginEpoch() != y.GetOriginEpoch() || x.GetOriginRef() != y.GetOriginRef() ||
			x.GetFrom() != y.GetFrom() || x.GetTo() != y.GetTo() || len(x.GetPuts()) != len(y.GetPuts()) || len(x.GetRemoves()) != len(y.GetRemoves()) {
			return false
		}
		for j, p := range x.GetPuts() {
			if !proto.Equal(p, y.GetPuts()[j]) {
				return false
			}
		}
		for j, r := range x.GetRemoves() {
			if !proto.Equal(r, y.GetRemoves()[j]) {
				return false
			}
		}
	}
	return true
}

func marshal(tb testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// deltaSeeds are the in-code seeds of FuzzDecodeDelta; testdata/fuzz holds
// more.
func deltaSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, m := range []*peerv1.Delta{
		EncodeDelta("sessions", sampleDelta(tb)),
		{Registry: "tools", OriginName: "a", OriginEpoch: 1, From: 2, To: 2},
		{Registry: "tools", OriginName: "a", OriginEpoch: 1, From: 0, To: 3, Removes: []*peerv1.Removal{{Key: "k", Seq: 3}}},
		{Registry: "tools", OriginName: "a", OriginEpoch: 1, From: 3, To: 1},
		{Registry: "tools", OriginName: "a", OriginEpoch: 1, To: 2, Puts: []*peerv1.Put{{Key: "k", Seq: 1}, {Key: "k", Seq: 2}}},
		{OriginRef: 1, RegistryRef: 1, From: 0, To: 1, Puts: []*peerv1.Put{{Key: "k", Seq: 1}}},
	} {
		out = append(out, marshal(tb, m))
	}
	return out
}

func digestSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, m := range []*peerv1.Digest{
		EncodeDigest("sessions", []crdt.Version{{Origin: crdt.Origin{Name: "a", Epoch: 1}, Seq: 3}, {Origin: crdt.Origin{Name: "b", Epoch: 1 << 60}}}),
		{Registry: "tools"},
		{Registry: "tools", Versions: []*peerv1.Version{{OriginName: "a", OriginEpoch: 1}, {OriginName: "a", OriginEpoch: 2}}},
		{Registry: "tools", Versions: []*peerv1.Version{{OriginName: "a", OriginEpoch: 0}}},
	} {
		out = append(out, marshal(tb, m))
	}
	return out
}

func chunkSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	owner := crdt.New(crdt.Origin{Name: "a", Epoch: 9}, crdt.Config{})
	owner.Put("k1", []byte("v1"))
	owner.Put("k2", []byte("v2"))
	for _, c := range owner.Snapshot(owner.Self(), 0) {
		out = append(out, marshal(tb, EncodeSnapshotChunk("sessions", c)))
	}
	for _, m := range []*peerv1.SnapshotChunk{
		{Registry: "tools", OriginName: "a", OriginEpoch: 1, Last: true},
		{Registry: "tools", OriginName: "a", OriginEpoch: 1, Seq: 3, Entries: []*peerv1.Put{{Key: "b", Seq: 1}, {Key: "a", Seq: 2}}},
	} {
		out = append(out, marshal(tb, m))
	}
	return out
}

// streamSeeds are pairs of requests on one stream: a declaring request
// followed by one using its refs, a conflicting redeclaration, an unknown
// ref.
func streamSeeds(tb testing.TB) [][2][]byte {
	var enc StreamEncoder
	d := sampleDelta(tb)
	plain := &peerv1.ReplicateRequest{Sender: "node-1@1", Deltas: []*peerv1.Delta{EncodeDelta("sessions", d), EncodeDelta("tools", d)}}
	first := marshal(tb, enc.Encode(plain))
	second := marshal(tb, enc.Encode(plain))
	conflict := marshal(tb, &peerv1.ReplicateRequest{Origins: []*peerv1.OriginDecl{{Ref: 1, Name: "other", Epoch: 2}}})
	unknown := marshal(tb, &peerv1.ReplicateRequest{Deltas: []*peerv1.Delta{{OriginRef: 9, RegistryRef: 1}}})
	text := marshal(tb, plain)
	return [][2][]byte{{first, second}, {first, conflict}, {first, unknown}, {text, first}, {second, first}}
}
