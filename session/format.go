package session

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The JSON encodings of Snapshot (persisted on the owner, carried by a
// handoff) and Result (forwarded between nodes) are versioned by a "v"
// field. A reader accepts every version up to its own and refuses a newer
// one with ErrFormat rather than guess.
//
//   - v0 (no "v"): Go field names, written before the types had JSON tags.
//     The v1 tags equal those names up to case, and encoding/json matches
//     keys case-insensitively, so v0 documents decode unchanged.
//   - v1: explicit tags ("info", "model", "tools"; "text", "structured",
//     "isError"), Info.Handoff.
//
// Info and Tool are versioned by the document that carries them. Golden
// files of every version are under testdata/format.
const (
	SnapshotFormat = 1
	ResultFormat   = 1
)

// ErrFormat is returned for a document of a format version newer than
// this code reads.
var ErrFormat = errors.New("format version is newer than this node reads")

// MarshalJSON writes the current snapshot format. A snapshot the actor
// built splices its model into its info and tools encoded once per tool
// set; the bytes are those of encoding every field.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	if s.enc != nil && len(s.Model) > 0 {
		return s.enc.appendSnapshot(make([]byte, 0, s.enc.size()+len(s.Model)), s.Model), nil
	}
	return s.marshalPlain()
}

// AppendJSON appends MarshalJSON's bytes to dst, so a store that copies
// them away (the journal) can reuse one buffer for every save.
func (s Snapshot) AppendJSON(dst []byte) ([]byte, error) {
	if s.enc != nil && len(s.Model) > 0 {
		return s.enc.appendSnapshot(dst, s.Model), nil
	}
	b, err := s.marshalPlain()
	return append(dst, b...), err
}

func (s Snapshot) marshalPlain() ([]byte, error) {
	type plain Snapshot
	return json.Marshal(struct {
		V int `json:"v"`
		plain
	}{SnapshotFormat, plain(s)})
}

// UnmarshalJSON reads every snapshot format up to SnapshotFormat.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	type plain Snapshot
	var doc struct {
		V int `json:"v"`
		plain
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	if doc.V > SnapshotFormat {
		return fmt.Errorf("session snapshot v%d (this node reads up to v%d): %w", doc.V, SnapshotFormat, ErrFormat)
	}
	*s = Snapshot(doc.plain)
	return nil
}

// MarshalJSON writes the current result format: the bytes encoding/json
// writes for it, directly (resultcodec.go) unless a structured value fails
// to encode, which encoding/json then reports.
func (r Result) MarshalJSON() ([]byte, error) {
	size := len(`{"v":1,"text":"","isError":false}`) + len(r.Text) + 8
	if r.Structured != nil {
		size += len(`,"structured":`) + 64
	}
	if b, ok := r.appendJSON(make([]byte, 0, size)); ok {
		return b, nil
	}
	return r.marshalPlain()
}

func (r Result) marshalPlain() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		V int `json:"v"`
		plain
	}{ResultFormat, plain(r)})
}

// UnmarshalJSON reads every result format up to ResultFormat. The common
// document, as MarshalJSON writes it, is read in one pass (resultdecode.go);
// encoding/json reads any other.
func (r *Result) UnmarshalJSON(b []byte) error {
	res, v, ok := decodeResult(b)
	if !ok {
		return r.unmarshalPlain(b)
	}
	if v > ResultFormat {
		return resultFormatError(v)
	}
	*r = res
	return nil
}

func (r *Result) unmarshalPlain(b []byte) error {
	type plain Result
	var doc struct {
		V int `json:"v"`
		plain
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	if doc.V > ResultFormat {
		return resultFormatError(doc.V)
	}
	*r = Result(doc.plain)
	return nil
}

func resultFormatError(v int) error {
	return fmt.Errorf("tool result v%d (this node reads up to v%d): %w", v, ResultFormat, ErrFormat)
}

// snapshotParts are the parts of a session's snapshot that rarely change,
// encoded once: its info (fixed for an actor's life) and its sticky tool
// set (replaced, never written, when it changes). Re-encoding the tools,
// input schemas included, on every update was most of a snapshot's cost.
// Immutable once built.
type snapshotParts struct {
	set   *sticky // the tool set tools encodes
	info  []byte
	tools []byte
}

// The constant parts of the current snapshot format around its fields.
const (
	snapHead  = `{"v":1,"info":`
	snapModel = `,"model":`
	snapTools = `,"tools":`
)

// encodeParts encodes info and set's tools for snapshots.
func encodeParts(info Info, set *sticky) (*snapshotParts, error) {
	ib, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encoding session info: %w", err)
	}
	tb, err := json.Marshal(set.tools)
	if err != nil {
		return nil, fmt.Errorf("encoding tools: %w", err)
	}
	return &snapshotParts{set: set, info: ib, tools: tb}, nil
}

// size is the snapshot's encoded length without its model.
func (p *snapshotParts) size() int {
	return len(snapHead) + len(p.info) + len(snapModel) + len(snapTools) + len(p.tools) + 1
}

// appendSnapshot appends the snapshot of model (compact JSON, as
// json.Marshal writes it).
func (p *snapshotParts) appendSnapshot(b []byte, model []byte) []byte {
	b = append(b, snapHead...)
	b = append(b, p.info...)
	b = append(b, snapModel...)
	b = append(b, model...)
	b = append(b, snapTools...)
	b = append(b, p.tools...)
	return append(b, '}')
}
