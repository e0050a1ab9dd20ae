// Package crdtpb converts between the crdt package's types and the peer
// protocol's protobuf messages (proto/mcpswarm/peer/v1), so that crdt itself
// imports no wire format.
//
// Decoding is strict, because its input comes from the network: an origin
// that is not "name@epoch", from > to, a key twice, a dot outside its range,
// an empty, over-long or non-UTF-8 key, an over-long value, too many entries
// or versions, or a malformed registry name is an error, and nothing is
// returned. Refs to stream declarations (peer.v1 Delta.origin_ref,
// registry_ref) are resolved by a StreamDecoder first; DecodeDelta refuses
// them. A decoded delta or chunk passes crdt.ValidateDelta or
// crdt.ValidateSnapshotChunk with the same bounds.
package crdtpb

import (
	"errors"
	"fmt"
	"math"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// ErrInvalid reports a message that breaks the bounds or structure of the
// protocol. It is returned (wrapped, sometimes together with a crdt error)
// by every Decode function.
var ErrInvalid = errors.New("crdtpb: invalid message")

// MaxRegistryLen is the longest registry name accepted.
const MaxRegistryLen = 64

// Limits bounds what a decoder accepts.
type Limits struct {
	// MaxKeyLen and MaxValueLen bound keys and values in bytes (defaults:
	// crdt.DefaultConfig's, 256 B and 1 MiB).
	MaxKeyLen   int
	MaxValueLen int
	// MaxEntries bounds the puts plus removals of a delta and the entries of
	// a snapshot chunk (default 65536, what a 1 MiB delta log can hold at 16
	// bytes of accounted overhead per entry).
	MaxEntries int
	// MaxVersions bounds the versions of a digest (default 4096 origins).
	MaxVersions int
}

// DefaultLimits returns the bounds matching crdt.DefaultConfig.
func DefaultLimits() Limits { return LimitsFor(crdt.DefaultConfig()) }

// LimitsFor returns the default limits with the key and value bounds of cfg.
func LimitsFor(cfg crdt.Config) Limits {
	return Limits{MaxKeyLen: cfg.MaxKeyLen, MaxValueLen: cfg.MaxValueLen, MaxEntries: 1 << 16, MaxVersions: 4096}.withDefaults()
}

func (l Limits) withDefaults() Limits {
	d := crdt.DefaultConfig()
	if l.MaxKeyLen <= 0 {
		l.MaxKeyLen = d.MaxKeyLen
	}
	if l.MaxValueLen <= 0 {
		l.MaxValueLen = d.MaxValueLen
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 1 << 16
	}
	if l.MaxVersions <= 0 {
		l.MaxVersions = 4096
	}
	return l
}

func (l Limits) config() crdt.Config {
	return crdt.Config{MaxKeyLen: l.MaxKeyLen, MaxValueLen: l.MaxValueLen}
}

// EncodeDelta returns the message for delta d of registry. Values are
// shared, not copied.
func EncodeDelta(registry string, d crdt.Delta) *peerv1.Delta {
	m := &peerv1.Delta{Registry: registry, OriginName: d.Origin.Name, OriginEpoch: d.Origin.Epoch, From: d.From, To: d.To}
	if len(d.Puts) > 0 {
		puts := make([]peerv1.Put, len(d.Puts))
		m.Puts = make([]*peerv1.Put, len(d.Puts))
		for i, p := range d.Puts {
			puts[i] = peerv1.Put{Key: p.Key, Value: p.Value, Seq: p.Seq}
			m.Puts[i] = &puts[i]
		}
	}
	if len(d.Removes) > 0 {
		rs := make([]peerv1.Removal, len(d.Removes))
		m.Removes = make([]*peerv1.Removal, len(d.Removes))
		for i, r := range d.Removes {
			rs[i] = peerv1.Removal{Key: r.Key, Seq: r.Seq}
			m.Removes[i] = &rs[i]
		}
	}
	return m
}

// DecodeDelta returns the registry and delta a message carries, or an
// error if it is malformed or beyond lim (zero fields take defaults).
func DecodeDelta(m *peerv1.Delta, lim Limits) (string, crdt.Delta, error) {
	lim = lim.withDefaults()
	if m.GetOriginRef() != 0 || m.GetRegistryRef() != 0 {
		return "", crdt.Delta{}, fmt.Errorf("decoding delta: unresolved stream ref (origin %d, registry %d): %w", m.GetOriginRef(), m.GetRegistryRef(), ErrInvalid)
	}
	reg, err := decodeRegistry(m.GetRegistry())
	if err != nil {
		return "", crdt.Delta{}, fmt.Errorf("decoding delta: %w", err)
	}
	o, err := decodeOrigin(m.GetOriginName(), m.GetOriginEpoch())
	if err != nil {
		return "", crdt.Delta{}, fmt.Errorf("decoding delta: %w", errors.Join(ErrInvalid, err))
	}
	if n := len(m.GetPuts()) + len(m.GetRemoves()); n > lim.MaxEntries {
		return "", crdt.Delta{}, fmt.Errorf("decoding delta of %s: %d entries exceed %d: %w", o, n, lim.MaxEntries, ErrInvalid)
	}
	d := crdt.Delta{Origin: o, From: m.GetFrom(), To: m.GetTo()}
	if ps := m.GetPuts(); len(ps) > 0 {
		d.Puts = make([]crdt.Put, len(ps))
		for i, p := range ps {
			if p == nil {
				return "", crdt.Delta{}, fmt.Errorf("decoding delta of %s: put %d is nil: %w", o, i, ErrInvalid)
			}
			d.Puts[i] = crdt.Put{Key: p.GetKey(), Value: nonNil(p.GetValue()), Seq: p.GetSeq()}
		}
	}
	if rs := m.GetRemoves(); len(rs) > 0 {
		d.Removes = make([]crdt.Removal, len(rs))
		for i, r := range rs {
			if r == nil {
				return "", crdt.Delta{}, fmt.Errorf("decoding delta of %s: removal %d is nil: %w", o, i, ErrInvalid)
			}
			d.Removes[i] = crdt.Removal{Key: r.GetKey(), Seq: r.GetSeq()}
		}
	}
	if err := crdt.ValidateDelta(d, lim.config()); err != nil {
		return "", crdt.Delta{}, fmt.Errorf("decoding delta: %w", errors.Join(ErrInvalid, err))
	}
	return reg, d, nil
}

// EncodeVersion returns the message for v.
func EncodeVersion(v crdt.Version) *peerv1.Version {
	return &peerv1.Version{OriginName: v.Origin.Name, OriginEpoch: v.Origin.Epoch, Seq: v.Seq}
}

// DecodeVersion returns the version a message carries.
func DecodeVersion(m *peerv1.Version) (crdt.Version, error) {
	if m == nil {
		return crdt.Version{}, fmt.Errorf("decoding version: nil: %w", ErrInvalid)
	}
	o, err := decodeOrigin(m.GetOriginName(), m.GetOriginEpoch())
	if err != nil {
		return crdt.Version{}, fmt.Errorf("decoding version: %w", errors.Join(ErrInvalid, err))
	}
	return crdt.Version{Origin: o, Seq: m.GetSeq()}, nil
}

// EncodeDigest returns the message for the digest vs of registry.
func EncodeDigest(registry string, vs []crdt.Version) *peerv1.Digest {
	m := &peerv1.Digest{Registry: registry}
	if len(vs) > 0 {
		msgs := make([]peerv1.Version, len(vs))
		m.Versions = make([]*peerv1.Version, len(vs))
		for i, v := range vs {
			msgs[i] = peerv1.Version{OriginName: v.Origin.Name, OriginEpoch: v.Origin.Epoch, Seq: v.Seq}
			m.Versions[i] = &msgs[i]
		}
	}
	return m
}

// DecodeDigest returns the registry and versions a digest carries. A digest
// lists each node name at most once.
func DecodeDigest(m *peerv1.Digest, lim Limits) (string, []crdt.Version, error) {
	lim = lim.withDefaults()
	reg, err := decodeRegistry(m.GetRegistry())
	if err != nil {
		return "", nil, fmt.Errorf("decoding digest: %w", err)
	}
	vs := m.GetVersions()
	if len(vs) > lim.MaxVersions {
		return "", nil, fmt.Errorf("decoding digest of %s: %d versions exceed %d: %w", reg, len(vs), lim.MaxVersions, ErrInvalid)
	}
	out := make([]crdt.Version, len(vs))
	seen := make(map[string]struct{}, len(vs))
	for i, mv := range vs {
		v, err := DecodeVersion(mv)
		if err != nil {
			return "", nil, fmt.Errorf("decoding digest of %s: %w", reg, err)
		}
		if _, dup := seen[v.Origin.Name]; dup {
			return "", nil, fmt.Errorf("decoding digest of %s: node %s twice: %w", reg, v.Origin.Name, ErrInvalid)
		}
		seen[v.Origin.Name] = struct{}{}
		out[i] = v
	}
	return reg, out, nil
}

// EncodeSnapshotChunk returns the message for chunk c of registry. Values
// are shared, not copied.
func EncodeSnapshotChunk(registry string, c crdt.SnapshotChunk) *peerv1.SnapshotChunk {
	m := &peerv1.SnapshotChunk{Registry: registry, OriginName: c.Origin.Name, OriginEpoch: c.Origin.Epoch, Seq: c.Seq, Index: uint32(c.Index), Last: c.Last}
	if len(c.Entries) > 0 {
		puts := make([]peerv1.Put, len(c.Entries))
		m.Entries = make([]*peerv1.Put, len(c.Entries))
		for i, p := range c.Entries {
			puts[i] = peerv1.Put{Key: p.Key, Value: p.Value, Seq: p.Seq}
			m.Entries[i] = &puts[i]
		}
	}
	return m
}

// DecodeSnapshotChunk returns the registry and chunk a message carries, or
// an error if it is malformed or beyond lim (zero fields take defaults).
// Order across chunks is checked by crdt.SnapshotReceiver.
func DecodeSnapshotChunk(m *peerv1.SnapshotChunk, lim Limits) (string, crdt.SnapshotChunk, error) {
	lim = lim.withDefaults()
	reg, err := decodeRegistry(m.GetRegistry())
	if err != nil {
		return "", crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot chunk: %w", err)
	}
	o, err := decodeOrigin(m.GetOriginName(), m.GetOriginEpoch())
	if err != nil {
		return "", crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot chunk: %w", errors.Join(ErrInvalid, err))
	}
	es := m.GetEntries()
	if len(es) > lim.MaxEntries {
		return "", crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot chunk of %s: %d entries exceed %d: %w", o, len(es), lim.MaxEntries, ErrInvalid)
	}
	if m.GetIndex() > math.MaxInt32 {
		return "", crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot chunk of %s: index %d: %w", o, m.GetIndex(), ErrInvalid)
	}
	c := crdt.SnapshotChunk{Origin: o, Seq: m.GetSeq(), Index: int(m.GetIndex()), Last: m.GetLast()}
	if len(es) > 0 {
		c.Entries = make([]crdt.Put, len(es))
		for i, p := range es {
			if p == nil {
				return "", crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot chunk of %s: entry %d is nil: %w", o, i, ErrInvalid)
			}
			c.Entries[i] = crdt.Put{Key: p.GetKey(), Value: nonNil(p.GetValue()), Seq: p.GetSeq()}
		}
	}
	if err := crdt.ValidateSnapshotChunk(c, lim.config()); err != nil {
		return "", crdt.SnapshotChunk{}, fmt.Errorf("decoding snapshot chunk: %w", errors.Join(ErrInvalid, err))
	}
	return reg, c, nil
}

// decodeRegistry accepts 1 to MaxRegistryLen characters of [a-z0-9._-].
func decodeRegistry(s string) (string, error) {
	if s == "" || len(s) > MaxRegistryLen {
		return "", fmt.Errorf("registry %.80q: must be 1 to %d characters: %w", s, MaxRegistryLen, ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", fmt.Errorf("registry %.80q: only [a-z0-9._-] allowed: %w", s, ErrInvalid)
		}
	}
	return s, nil
}

// nonNil keeps an empty value distinct from an absent one.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// decodeOrigin checks an origin carried as name and epoch: the same rules
// as crdt.ParseOrigin's "name@epoch" text.
func decodeOrigin(name string, epoch uint64) (crdt.Origin, error) {
	o := crdt.Origin{Name: name, Epoch: epoch}
	if !o.Valid() {
		return crdt.Origin{}, fmt.Errorf("origin %q@%d: name must be 1 to %d characters of [A-Za-z0-9._-] and epoch above zero: %w",
			name, epoch, crdt.MaxOriginNameLen, crdt.ErrInvalidOrigin)
	}
	return o, nil
}
