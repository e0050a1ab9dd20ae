package crdt

import "errors"

// ErrInvalidOrigin reports an origin whose name or epoch is malformed. It is
// returned by ParseOrigin, Apply, MergeDeltas and SnapshotReceiver.Add.
var ErrInvalidOrigin = errors.New("crdt: invalid origin")

// ErrInvalidKey reports an empty, over-long or non-UTF-8 key. It is returned
// by Map.Put, Apply and SnapshotReceiver.Add.
var ErrInvalidKey = errors.New("crdt: invalid key")

// ErrValueTooLarge reports a value longer than Config.MaxValueLen. It is
// returned by Map.Put, Apply and SnapshotReceiver.Add.
var ErrValueTooLarge = errors.New("crdt: value too large")

// ErrMalformedDelta reports a delta that no honest origin produces (From >
// To, a dot outside the range, a key twice). It is returned by Apply and
// MergeDeltas.
var ErrMalformedDelta = errors.New("crdt: malformed delta")

// ErrOwnOrigin reports remote data claiming to be this map's own origin, or
// a newer incarnation of its name. It is returned by Apply and
// SnapshotReceiver.Add.
var ErrOwnOrigin = errors.New("crdt: data for own origin")

// ErrNotMergeable reports two deltas of different origins or with ranges
// that neither touch nor overlap. It is returned by MergeDeltas.
var ErrNotMergeable = errors.New("crdt: deltas not mergeable")

// ErrMalformedSnapshot reports a snapshot chunk out of order, for another
// origin or sequence, after the last chunk, or with invalid entries; and a
// Commit before the last chunk. It is returned by SnapshotReceiver.Add and
// SnapshotReceiver.Commit.
var ErrMalformedSnapshot = errors.New("crdt: malformed snapshot")
