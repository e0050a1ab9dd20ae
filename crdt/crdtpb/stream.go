package crdtpb

import (
	"errors"
	"fmt"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// MaxStreamDecls bounds the declarations one Replicate stream may make,
// origins and registries together. A StreamEncoder never makes more; a
// StreamDecoder refuses a request that would take it past the bound.
const MaxStreamDecls = 4096

// StreamEncoder rewrites the requests of one Replicate stream so that each
// origin and each registry is declared once, on first use, and later named
// by a small ref (peer.v1 OriginDecl, RegistryDecl; origins and registries
// are numbered apart, each from 1). Its zero value is ready
// for a new stream; it is not safe for concurrent use.
type StreamEncoder struct {
	origins    map[crdt.Origin]uint32
	registries map[string]uint32
}

// Encode returns the request to send in place of req on this stream: the
// same sender and deltas, each delta naming its origin and registry by ref,
// preceded by the declarations of refs this stream has not seen yet. A
// delta whose origin or registry is malformed, or that already uses refs,
// is sent as it is, and so are new names once MaxStreamDecls refs exist.
// Neither req nor its deltas are modified; the result shares their puts and
// removals.
func (e *StreamEncoder) Encode(req *peerv1.ReplicateRequest) *peerv1.ReplicateRequest {
	if e.origins == nil {
		e.origins = map[crdt.Origin]uint32{}
		e.registries = map[string]uint32{}
	}
	out := &peerv1.ReplicateRequest{Sender: req.GetSender(), Deltas: make([]*peerv1.Delta, 0, len(req.GetDeltas()))}
	for _, d := range req.GetDeltas() {
		if d == nil || d.GetOriginRef() != 0 || d.GetRegistryRef() != 0 {
			out.Deltas = append(out.Deltas, d)
			continue
		}
		m := &peerv1.Delta{Registry: d.GetRegistry(), OriginName: d.GetOriginName(), OriginEpoch: d.GetOriginEpoch(),
			From: d.GetFrom(), To: d.GetTo(), Puts: d.GetPuts(), Removes: d.GetRemoves()}
		if ref := e.originRef(out, crdt.Origin{Name: m.OriginName, Epoch: m.OriginEpoch}); ref != 0 {
			m.OriginRef, m.OriginName, m.OriginEpoch = ref, "", 0
		}
		if ref := e.registryRef(out, m.Registry); ref != 0 {
			m.RegistryRef, m.Registry = ref, ""
		}
		out.Deltas = append(out.Deltas, m)
	}
	return out
}

// originRef returns o's ref, declaring it in out on first use; 0 when o
// must travel as text.
func (e *StreamEncoder) originRef(out *peerv1.ReplicateRequest, o crdt.Origin) uint32 {
	if ref, ok := e.origins[o]; ok {
		return ref
	}
	if !o.Valid() || e.full() {
		return 0
	}
	ref := uint32(len(e.origins) + 1)
	e.origins[o] = ref
	out.Origins = append(out.Origins, &peerv1.OriginDecl{Ref: ref, Name: o.Name, Epoch: o.Epoch})
	return ref
}

// registryRef returns the ref of registry name, declaring it in out on
// first use; 0 when the name must travel as text.
func (e *StreamEncoder) registryRef(out *peerv1.ReplicateRequest, name string) uint32 {
	if ref, ok := e.registries[name]; ok {
		return ref
	}
	if _, err := decodeRegistry(name); err != nil || e.full() {
		return 0
	}
	ref := uint32(len(e.registries) + 1)
	e.registries[name] = ref
	out.Registries = append(out.Registries, &peerv1.RegistryDecl{Ref: ref, Name: name})
	return ref
}

func (e *StreamEncoder) full() bool { return len(e.origins)+len(e.registries) >= MaxStreamDecls }

// StreamDecoder resolves the refs of the requests received on one
// Replicate stream. Its zero value is ready for a new stream; it is not
// safe for concurrent use.
type StreamDecoder struct {
	origins    map[uint32]crdt.Origin
	registries map[uint32]string
}

// Resolve records req's declarations and rewrites its deltas in place so
// that each names its origin and registry as text, with no refs: what
// DecodeDelta accepts. It returns an error wrapping ErrInvalid, and
// changes neither req nor the decoder, when a declaration has ref 0 or a
// malformed name or epoch, declares a ref again with other content, or
// takes the stream past MaxStreamDecls declarations, or when a delta uses a
// ref not declared on the stream or names its origin or registry both by
// ref and as text. The stream should then be cut: what follows may depend
// on declarations the receiver refused.
func (sd *StreamDecoder) Resolve(req *peerv1.ReplicateRequest) error {
	newOrigins, newRegs, err := sd.declarations(req)
	if err != nil {
		return fmt.Errorf("resolving stream refs: %w", err)
	}
	origin := func(ref uint32) (crdt.Origin, bool) {
		if o, ok := sd.origins[ref]; ok {
			return o, true
		}
		o, ok := newOrigins[ref]
		return o, ok
	}
	registry := func(ref uint32) (string, bool) {
		if r, ok := sd.registries[ref]; ok {
			return r, true
		}
		r, ok := newRegs[ref]
		return r, ok
	}
	for i, d := range req.GetDeltas() {
		if ref := d.GetOriginRef(); ref != 0 {
			if d.GetOriginName() != "" || d.GetOriginEpoch() != 0 {
				return fmt.Errorf("resolving stream refs: delta %d names its origin by ref %d and as text: %w", i, ref, ErrInvalid)
			}
			if _, ok := origin(ref); !ok {
				return fmt.Errorf("resolving stream refs: delta %d: origin ref %d not declared: %w", i, ref, ErrInvalid)
			}
		}
		if ref := d.GetRegistryRef(); ref != 0 {
			if d.GetRegistry() != "" {
				return fmt.Errorf("resolving stream refs: delta %d names its registry by ref %d and as text: %w", i, ref, ErrInvalid)
			}
			if _, ok := registry(ref); !ok {
				return fmt.Errorf("resolving stream refs: delta %d: registry ref %d not declared: %w", i, ref, ErrInvalid)
			}
		}
	}
	// Everything checked: commit the declarations, then rewrite.
	if sd.origins == nil {
		sd.origins = map[uint32]crdt.Origin{}
		sd.registries = map[uint32]string{}
	}
	for ref, o := range newOrigins {
		sd.origins[ref] = o
	}
	for ref, r := range newRegs {
		sd.registries[ref] = r
	}
	for _, d := range req.GetDeltas() {
		if d.GetOriginRef() != 0 {
			o := sd.origins[d.OriginRef]
			d.OriginName, d.OriginEpoch, d.OriginRef = o.Name, o.Epoch, 0
		}
		if d.GetRegistryRef() != 0 {
			d.Registry, d.RegistryRef = sd.registries[d.RegistryRef], 0
		}
	}
	return nil
}

// declarations checks req's declarations against the stream's and returns
// those that are new.
func (sd *StreamDecoder) declarations(req *peerv1.ReplicateRequest) (map[uint32]crdt.Origin, map[uint32]string, error) {
	var newOrigins map[uint32]crdt.Origin
	var newRegs map[uint32]string
	total := len(sd.origins) + len(sd.registries)
	for i, od := range req.GetOrigins() {
		if od == nil || od.GetRef() == 0 {
			return nil, nil, fmt.Errorf("origin declaration %d: ref 0: %w", i, ErrInvalid)
		}
		o, err := decodeOrigin(od.GetName(), od.GetEpoch())
		if err != nil {
			return nil, nil, fmt.Errorf("origin declaration %d: %w", i, errors.Join(ErrInvalid, err))
		}
		ref := od.GetRef()
		prev, ok := sd.origins[ref]
		if !ok {
			prev, ok = newOrigins[ref]
		}
		if ok {
			if prev != o {
				return nil, nil, fmt.Errorf("origin declaration %d: ref %d redeclared as %s, was %s: %w", i, ref, o, prev, ErrInvalid)
			}
			continue
		}
		if total++; total > MaxStreamDecls {
			return nil, nil, fmt.Errorf("origin declaration %d: more than %d declarations on the stream: %w", i, MaxStreamDecls, ErrInvalid)
		}
		if newOrigins == nil {
			newOrigins = map[uint32]crdt.Origin{}
		}
		newOrigins[ref] = o
	}
	for i, rd := range req.GetRegistries() {
		if rd == nil || rd.GetRef() == 0 {
			return nil, nil, fmt.Errorf("registry declaration %d: ref 0: %w", i, ErrInvalid)
		}
		name, err := decodeRegistry(rd.GetName())
		if err != nil {
			return nil, nil, fmt.Errorf("registry declaration %d: %w", i, err)
		}
		ref := rd.GetRef()
		prev, ok := sd.registries[ref]
		if !ok {
			prev, ok = newRegs[ref]
		}
		if ok {
			if prev != name {
				return nil, nil, fmt.Errorf("registry declaration %d: ref %d redeclared as %q, was %q: %w", i, ref, name, prev, ErrInvalid)
			}
			continue
		}
		if total++; total > MaxStreamDecls {
			return nil, nil, fmt.Errorf("registry declaration %d: more than %d declarations on the stream: %w", i, MaxStreamDecls, ErrInvalid)
		}
		if newRegs == nil {
			newRegs = map[uint32]string{}
		}
		newRegs[ref] = name
	}
	return newOrigins, newRegs, nil
}
