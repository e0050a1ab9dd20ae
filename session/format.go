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

// MarshalJSON writes the current snapshot format.
func (s Snapshot) MarshalJSON() ([]byte, error) {
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

// MarshalJSON writes the current result format.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		V int `json:"v"`
		plain
	}{ResultFormat, plain(r)})
}

// UnmarshalJSON reads every result format up to ResultFormat.
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result
	var doc struct {
		V int `json:"v"`
		plain
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	if doc.V > ResultFormat {
		return fmt.Errorf("tool result v%d (this node reads up to v%d): %w", doc.V, ResultFormat, ErrFormat)
	}
	*r = Result(doc.plain)
	return nil
}
