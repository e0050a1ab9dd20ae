package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// DefaultMaxStateBytes is the default bound on one session's snapshot. A
// session at it holds about twice as much heap (its model and the model's
// JSON; BenchmarkSessionAtTheStateBound), so size nodes by
// docs/SECURITY.md, "Resource bounds". 256 KiB keeps 10,000 sessions at
// the bound within about 5 GiB of heap, so a 24 GiB node survives them;
// the demo apps at their own bounds stay well under it.
const DefaultMaxStateBytes = 256 << 10

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

// stateSizer measures a session's snapshots. It remembers the encoded
// size of the snapshot without its model per tool set: a session's info
// never changes after its first render, and its sticky tool set is
// replaced, never written, when it changes, so most updates encode neither
// again (encoding them on every update doubled BenchmarkWriteThroughActor).
// Actor goroutine only (and newActor, before it runs).
type stateSizer struct {
	tools *sticky // the set base was measured with; never written after publication
	base  int
}

// check refuses snap, whose tools are those of tools, when its encoding
// would exceed limit bytes, with an error that names the size, the limit
// and the setting.
func (z *stateSizer) check(snap Snapshot, tools *sticky, limit int) error {
	if tools != z.tools {
		if snap.enc != nil && snap.enc.set == tools {
			z.tools, z.base = tools, snap.enc.size()
		} else {
			base, err := stateBytes(Snapshot{Info: snap.Info, Tools: snap.Tools})
			if err != nil {
				return err
			}
			z.tools, z.base = tools, base
		}
	}
	return checkStateSize(z.base+len(snap.Model), limit)
}

// checkStateSize refuses a snapshot of n bytes over limit.
func checkStateSize(n, limit int) error {
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
