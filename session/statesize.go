package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// DefaultMaxStateBytes is the default bound on one session's snapshot:
// 10,000 sessions at it hold about 10 GiB of model JSON, within a 24 GiB
// node (see docs/SECURITY.md, "Resource bounds").
const DefaultMaxStateBytes = 1 << 20

// stateBytes is the length of snap as a Store encodes it (encoding/json,
// the current snapshot format). The model is already encoded, compact, by
// json.Marshal, so it is counted by length rather than encoded again; only
// the info and tools are encoded here.
func stateBytes(snap Snapshot) (int, error) {
	model := snap.Model
	snap.Model = nil // encodes as null
	b, err := json.Marshal(snap)
	if err != nil {
		return 0, fmt.Errorf("encoding snapshot: %w", err)
	}
	return len(b) - len("null") + len(model), nil
}

// checkStateSize refuses snap when its encoding would exceed limit bytes,
// with an error that names the size, the limit and the setting.
func checkStateSize(snap Snapshot, limit int) error {
	n, err := stateBytes(snap)
	if err != nil {
		return err
	}
	if n <= limit {
		return nil
	}
	return fmt.Errorf("its state would be %s (%d bytes), over the %s per-session limit (limits.session_state_bytes): %w",
		humanBytes(n), n, humanBytes(limit), ErrStateTooLarge)
}

// humanBytes writes n in B, KiB or MiB with at most one decimal.
func humanBytes(n int) string {
	unit, div := "B", 1.0
	switch {
	case n >= 1<<20:
		unit, div = "MiB", 1<<20
	case n >= 1<<10:
		unit, div = "KiB", 1<<10
	}
	s := strconv.FormatFloat(float64(n)/div, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + unit
}
