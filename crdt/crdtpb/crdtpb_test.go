package crdtpb

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
	"google.golang.org/protobuf/proto"
)

var origin = crdt.Origin{Name: "node-1", Epoch: 118927498371465216}

func sampleDelta(t testing.TB) crdt.Delta {
	m := crdt.New(origin, crdt.Config{})
	var ds []crdt.Delta
	for _, kv := range [][2]string{{"s1", `{"app":"demo"}`}, {"s2", ""}, {"s3", "x"}} {
		d, err := m.Put(kv[0], []byte(kv[1]))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	d, _ := m.Remove("s3")
	ds = append(ds, d)
	merged, err := crdt.MergeAll(ds)
	if err != nil {
		t.Fatal(err)
	}
	return merged
}

func roundTrip[M proto.Message](t testing.TB, m M) M {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeltaRoundTrip(t *testing.T) {
	d := sampleDelta(t)
	reg, got, err := DecodeDelta(roundTrip(t, EncodeDelta("sessions", d)), Limits{})
	if err != nil || reg != "sessions" || !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip: %q %+v %v, want %+v", reg, got, err, d)
	}
}

func TestDigestAndChunkRoundTrip(t *testing.T) {
	vs := []crdt.Version{{Origin: origin, Seq: 7}, {Origin: crdt.Origin{Name: "node-2", Epoch: 3}, Seq: 0}}
	reg, got, err := DecodeDigest(roundTrip(t, EncodeDigest("tools", vs)), Limits{})
	if err != nil || reg != "tools" || !reflect.DeepEqual(got, vs) {
		t.Fatalf("digest round trip: %q %v %v", reg, got, err)
	}
	c := crdt.SnapshotChunk{Origin: origin, Seq: 9, Index: 2, Last: true, Entries: []crdt.Put{{Key: "a", Value: []byte("1"), Seq: 3}, {Key: "b", Value: []byte{}, Seq: 9}}}
	reg, gotc, err := DecodeSnapshotChunk(roundTrip(t, EncodeSnapshotChunk("conns", c)), Limits{})
	if err != nil || reg != "conns" || !reflect.DeepEqual(gotc, c) {
		t.Fatalf("chunk round trip: %q %+v %v", reg, gotc, err)
	}
}

func TestDecodeDeltaRejects(t *testing.T) {
	lim := Limits{MaxKeyLen: 8, MaxValueLen: 4, MaxEntries: 3}
	put := func(k, v string, s uint64) *peerv1.Put { return &peerv1.Put{Key: k, Value: []byte(v), Seq: s} }
	ok := func() *peerv1.Delta {
		return &peerv1.Delta{Registry: "sessions", OriginName: "n", OriginEpoch: 1, From: 0, To: 2, Puts: []*peerv1.Put{put("a", "1", 1)}, Removes: []*peerv1.Removal{{Key: "b", Seq: 2}}}
	}
	if _, _, err := DecodeDelta(ok(), lim); err != nil {
		t.Fatalf("valid delta rejected: %v", err)
	}
	for name, mutate := range map[string]func(*peerv1.Delta){
		"origin without epoch":     func(m *peerv1.Delta) { m.OriginEpoch = 0 },
		"origin without name":      func(m *peerv1.Delta) { m.OriginName = "" },
		"origin bad name":          func(m *peerv1.Delta) { m.OriginName = "n/x" },
		"empty registry":           func(m *peerv1.Delta) { m.Registry = "" },
		"registry bad chars":       func(m *peerv1.Delta) { m.Registry = "Sessions\n" },
		"from > to":                func(m *peerv1.Delta) { m.From = 3 },
		"duplicate put key":        func(m *peerv1.Delta) { m.Puts = append(m.Puts, put("a", "2", 2)) },
		"put and removal of a key": func(m *peerv1.Delta) { m.Removes[0].Key = "a" },
		"duplicate put seq":        func(m *peerv1.Delta) { m.Puts = append(m.Puts, put("c", "2", 1)) },
		"put outside range":        func(m *peerv1.Delta) { m.Puts[0].Seq = 3 },
		"put at from":              func(m *peerv1.Delta) { m.From, m.Puts[0].Seq = 1, 1 },
		"removal of dot 0":         func(m *peerv1.Delta) { m.Removes[0].Seq = 0 },
		"removal past to":          func(m *peerv1.Delta) { m.Removes[0].Seq = 3 },
		"over-long key":            func(m *peerv1.Delta) { m.Puts[0].Key = strings.Repeat("k", 9) },
		"empty key":                func(m *peerv1.Delta) { m.Removes[0].Key = "" },
		"oversized value":          func(m *peerv1.Delta) { m.Puts[0].Value = []byte("12345") },
		"unresolved origin ref":    func(m *peerv1.Delta) { m.OriginRef = 1 },
		"unresolved registry ref":  func(m *peerv1.Delta) { m.Registry, m.RegistryRef = "", 1 },
		"too many entries": func(m *peerv1.Delta) {
			m.To = 4
			m.Puts = append(m.Puts, put("c", "", 3), put("d", "", 4))
		},
	} {
		m := ok()
		mutate(m)
		if reg, d, err := DecodeDelta(m, lim); !errors.Is(err, ErrInvalid) || reg != "" || !reflect.DeepEqual(d, crdt.Delta{}) {
			t.Errorf("%s: got %q %+v %v, want ErrInvalid and nothing", name, reg, d, err)
		}
	}
}

func TestDecodeDigestAndChunkReject(t *testing.T) {
	for name, m := range map[string]*peerv1.Digest{
		"bad origin":  {Registry: "tools", Versions: []*peerv1.Version{{OriginName: "x", OriginEpoch: 0, Seq: 1}}},
		"node twice":  {Registry: "tools", Versions: []*peerv1.Version{{OriginName: "x", OriginEpoch: 1}, {OriginName: "x", OriginEpoch: 2}}},
		"too many":    {Registry: "tools", Versions: []*peerv1.Version{{OriginName: "x", OriginEpoch: 1}, {OriginName: "y", OriginEpoch: 1}, {OriginName: "z", OriginEpoch: 1}}},
		"no registry": {Versions: []*peerv1.Version{{OriginName: "x", OriginEpoch: 1}}},
	} {
		if _, vs, err := DecodeDigest(m, Limits{MaxVersions: 2}); !errors.Is(err, ErrInvalid) || vs != nil {
			t.Errorf("digest %s: %v %v, want ErrInvalid", name, vs, err)
		}
	}
	put := func(k string, s uint64) *peerv1.Put { return &peerv1.Put{Key: k, Seq: s} }
	for name, m := range map[string]*peerv1.SnapshotChunk{
		"keys not ascending":    {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 5, Entries: []*peerv1.Put{put("b", 1), put("a", 2)}},
		"duplicate key":         {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 5, Entries: []*peerv1.Put{put("a", 1), put("a", 2)}},
		"dot past seq":          {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 5, Entries: []*peerv1.Put{put("a", 6)}},
		"dot zero":              {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 5, Entries: []*peerv1.Put{put("a", 0)}},
		"more entries than seq": {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 1, Entries: []*peerv1.Put{put("a", 1), put("b", 1)}},
		"too many entries":      {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 9, Entries: []*peerv1.Put{put("a", 1), put("b", 2), put("c", 3)}},
		"bad origin":            {Registry: "tools", OriginName: "x@-1", OriginEpoch: 1, Seq: 5},
		"huge index":            {Registry: "tools", OriginName: "x", OriginEpoch: 1, Seq: 5, Index: 1 << 31},
	} {
		if _, c, err := DecodeSnapshotChunk(m, Limits{MaxEntries: 2}); !errors.Is(err, ErrInvalid) || c.Entries != nil {
			t.Errorf("chunk %s: %+v %v, want ErrInvalid", name, c, err)
		}
	}
}
