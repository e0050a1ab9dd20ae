package cluster

import (
	"fmt"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// The conversions between crdt values and peer.v1 messages. Decoding is
// strict about structure (origin syntax, intervals); the crdt map checks
// keys and values when a delta is applied.

func deltaToPB(registry string, d crdt.Delta) *peerv1.Delta {
	pb := &peerv1.Delta{Registry: registry, Origin: d.Origin.String(), From: d.From, To: d.To}
	if len(d.Puts) > 0 {
		pb.Puts = make([]*peerv1.Put, len(d.Puts))
		for i, p := range d.Puts {
			pb.Puts[i] = &peerv1.Put{Key: p.Key, Value: p.Value, Seq: p.Seq}
		}
	}
	if len(d.Removes) > 0 {
		pb.Removes = make([]*peerv1.Removal, len(d.Removes))
		for i, r := range d.Removes {
			pb.Removes[i] = &peerv1.Removal{Key: r.Key, Seq: r.Seq}
		}
	}
	return pb
}

func deltaFromPB(pb *peerv1.Delta) (crdt.Delta, error) {
	o, err := crdt.ParseOrigin(pb.GetOrigin())
	if err != nil {
		return crdt.Delta{}, fmt.Errorf("decoding delta origin: %w", err)
	}
	if pb.GetFrom() > pb.GetTo() {
		return crdt.Delta{}, fmt.Errorf("decoding delta of %s: from %d after to %d", o, pb.GetFrom(), pb.GetTo())
	}
	d := crdt.Delta{Origin: o, From: pb.GetFrom(), To: pb.GetTo()}
	if n := len(pb.GetPuts()); n > 0 {
		d.Puts = make([]crdt.Put, n)
		for i, p := range pb.GetPuts() {
			if p.GetSeq() <= d.From || p.GetSeq() > d.To {
				return crdt.Delta{}, fmt.Errorf("decoding delta of %s: put seq %d outside (%d, %d]", o, p.GetSeq(), d.From, d.To)
			}
			d.Puts[i] = crdt.Put{Key: p.GetKey(), Value: p.GetValue(), Seq: p.GetSeq()}
			if d.Puts[i].Value == nil {
				d.Puts[i].Value = []byte{}
			}
		}
	}
	if n := len(pb.GetRemoves()); n > 0 {
		d.Removes = make([]crdt.Removal, n)
		for i, r := range pb.GetRemoves() {
			if r.GetSeq() == 0 || r.GetSeq() > d.To {
				return crdt.Delta{}, fmt.Errorf("decoding delta of %s: removal of seq %d past %d", o, r.GetSeq(), d.To)
			}
			d.Removes[i] = crdt.Removal{Key: r.GetKey(), Seq: r.GetSeq()}
		}
	}
	return d, nil
}

func chunkToPB(registry string, c crdt.SnapshotChunk) *peerv1.SnapshotChunk {
	pb := &peerv1.SnapshotChunk{Registry: registry, Origin: c.Origin.String(), Seq: c.Seq, Index: uint32(c.Index), Last: c.Last}
	pb.Entries = make([]*peerv1.Put, len(c.Entries))
	for i, p := range c.Entries {
		pb.Entries[i] = &peerv1.Put{Key: p.Key, Value: p.Value, Seq: p.Seq}
	}
	return pb
}

func chunkFromPB(pb *peerv1.SnapshotChunk) (crdt.SnapshotChunk, error) {
	o, err := crdt.ParseOrigin(pb.GetOrigin())
	if err != nil {
		return crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot origin: %w", err)
	}
	c := crdt.SnapshotChunk{Origin: o, Seq: pb.GetSeq(), Index: int(pb.GetIndex()), Last: pb.GetLast()}
	c.Entries = make([]crdt.Put, len(pb.GetEntries()))
	for i, p := range pb.GetEntries() {
		if p.GetSeq() == 0 || p.GetSeq() > c.Seq {
			return crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot of %s: entry seq %d past %d", o, p.GetSeq(), c.Seq)
		}
		c.Entries[i] = crdt.Put{Key: p.GetKey(), Value: p.GetValue(), Seq: p.GetSeq()}
		if c.Entries[i].Value == nil {
			c.Entries[i].Value = []byte{}
		}
	}
	return c, nil
}

func versionsToPB(registry string, vs []crdt.Version) *peerv1.Digest {
	d := &peerv1.Digest{Registry: registry, Versions: make([]*peerv1.Version, len(vs))}
	for i, v := range vs {
		d.Versions[i] = &peerv1.Version{Origin: v.Origin.String(), Seq: v.Seq}
	}
	return d
}

func versionsFromPB(d *peerv1.Digest) ([]crdt.Version, error) {
	out := make([]crdt.Version, 0, len(d.GetVersions()))
	for _, v := range d.GetVersions() {
		o, err := crdt.ParseOrigin(v.GetOrigin())
		if err != nil {
			return nil, fmt.Errorf("decoding digest of %s: %w", d.GetRegistry(), err)
		}
		out = append(out, crdt.Version{Origin: o, Seq: v.GetSeq()})
	}
	return out, nil
}
