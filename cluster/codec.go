package cluster

import (
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/crdt/crdtpb"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// The conversions between crdt values and peer.v1 messages go through
// crdtpb, whose decoders are strict: origin syntax, intervals, dots, key and
// value bounds, entry and version counts.

func deltaToPB(registry string, d crdt.Delta) *peerv1.Delta { return crdtpb.EncodeDelta(registry, d) }

func deltaFromPB(pb *peerv1.Delta, lim crdtpb.Limits) (crdt.Delta, error) {
	_, d, err := crdtpb.DecodeDelta(pb, lim)
	return d, err
}

func chunkToPB(registry string, c crdt.SnapshotChunk) *peerv1.SnapshotChunk {
	return crdtpb.EncodeSnapshotChunk(registry, c)
}

func chunkFromPB(pb *peerv1.SnapshotChunk, lim crdtpb.Limits) (crdt.SnapshotChunk, error) {
	_, c, err := crdtpb.DecodeSnapshotChunk(pb, lim)
	return c, err
}

func versionsToPB(registry string, vs []crdt.Version) *peerv1.Digest {
	return crdtpb.EncodeDigest(registry, vs)
}

func versionsFromPB(d *peerv1.Digest, lim crdtpb.Limits) ([]crdt.Version, error) {
	_, vs, err := crdtpb.DecodeDigest(d, lim)
	return vs, err
}
