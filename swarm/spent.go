package swarm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/standby"
)

// spentCopies is how many nodes hold each spent request state: its
// holders, the first spentCopies live members in the nonce's rendezvous
// order. Two, so that any one membership change (a holder dies, restarts
// empty, or a new node ranks above it) leaves a holder among the new
// first two, which the nonce's next Spend asks; the holders then copy it
// to whichever of the new first two lacks it (Nonces.rebalance).
const spentCopies = 2

// spentHolders returns the nodes that hold nonce's spent state among
// members: the k of highest rendezvous score, highest first (all of them
// when there are fewer). Rendezvous order is what makes a holder's death
// cheap: the others keep their rank, so the second holder moves up to
// first, holding the state already, and only one node (the next in the
// order) needs a copy. It is pure: every node, with the same members,
// names the same holders.
func spentHolders(nonce string, members []string, k int) []string {
	type scored struct {
		name  string
		score uint64
	}
	pool := make([]scored, 0, len(members))
	for _, m := range members {
		if !slices.ContainsFunc(pool, func(s scored) bool { return s.name == m }) {
			pool = append(pool, scored{m, standby.Weight(nonce, m)})
		}
	}
	slices.SortFunc(pool, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	out := make([]string, 0, min(k, len(pool)))
	for _, s := range pool[:min(k, len(pool))] {
		out = append(out, s.name)
	}
	return out
}

// spentBucket is where a node stores the spent states it holds, beside
// the cluster's registries in its bbolt file (never replicated).
const spentBucket = "spent-states"

// spentSweepEvery is how often holding a state also forgets the expired
// ones.
const spentSweepEvery = time.Minute

// spentEntry is a held state: its expiry (Unix seconds) and the Spend
// call that spent it (see forwardv1.SpendStateRequest.spend).
type spentEntry struct {
	exp int64
	by  string
}

// encode is the entry as stored: the expiry, 8 bytes big-endian, then the
// call's id.
func (e spentEntry) encode() []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(e.exp)), e.by...)
}

// spentStore is the spent request states this node holds, in memory and,
// when it has a store, on disk, so a restarted node holds them again. Safe
// for concurrent use.
type spentStore struct {
	st cluster.Storage // nil: memory only

	mu        sync.Mutex
	held      map[string]spentEntry
	lastSweep time.Time
}

// newSpentStore returns the states st holds that expire after now (st
// nil: an empty store in memory).
func newSpentStore(st cluster.Storage, now time.Time) (*spentStore, error) {
	h := &spentStore{st: st, held: map[string]spentEntry{}, lastSweep: now}
	if st == nil {
		return h, nil
	}
	err := st.Load(spentBucket, func(nonce string, v []byte) error {
		if len(v) >= 8 {
			if e := (spentEntry{exp: int64(binary.BigEndian.Uint64(v)), by: string(v[8:])}); e.exp >= now.Unix() {
				h.held[nonce] = e
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the spent request states held here: %w", err)
	}
	return h, nil
}

// hold keeps nonce, spent by call by, until expires and reports whether
// it was held already by another call. The check and the record are one
// step under the store's lock: of two calls holding the same nonce at
// once, exactly one hears it was not. A state that cannot be stored is
// not held, and err says why.
func (h *spentStore) hold(nonce, by string, expires, now time.Time) (already bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.lastSweep) >= spentSweepEvery {
		h.sweepLocked(now)
	}
	if e, ok := h.held[nonce]; ok {
		return by == "" || e.by != by, nil
	}
	e := spentEntry{exp: expires.Unix(), by: by}
	if h.st != nil {
		if err := h.st.Write(spentBucket, nonce, e.encode(), func() error { return nil }); err != nil {
			return false, fmt.Errorf("storing a spent request state: %w", err)
		}
	}
	h.held[nonce] = e
	return false, nil
}

// has reports whether nonce is held here.
func (h *spentStore) has(nonce string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.held[nonce]
	return ok
}

// len is how many states are held here.
func (h *spentStore) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// snapshot returns the held states that expire after now.
func (h *spentStore) snapshot(now time.Time) map[string]spentEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]spentEntry, len(h.held))
	for nonce, e := range h.held {
		if e.exp >= now.Unix() {
			out[nonce] = e
		}
	}
	return out
}

// sweepLocked forgets the states expired before now. One that stays on
// disk by a failed delete is dropped at the next load.
func (h *spentStore) sweepLocked(now time.Time) {
	h.lastSweep = now
	for nonce, e := range h.held {
		if e.exp >= now.Unix() {
			continue
		}
		delete(h.held, nonce)
		if h.st != nil {
			_ = h.st.Write(spentBucket, nonce, nil, func() error { return nil })
		}
	}
}

// spentMoves returns the copies self sends after a membership change, by
// node: each held state (nonce → its entry) goes to every holder it has among
// after (live members, name → epoch) that was not one of its holders
// among before, or was but restarted since (another epoch: it may have
// come back empty). before nil (this node just started) sends every state
// to its holders. Pure.
func spentMoves[V any](held map[string]V, self string, before, after map[string]uint64) map[string]map[string]V {
	was := slices.Sorted(maps.Keys(before))
	is := slices.Sorted(maps.Keys(after))
	moves := map[string]map[string]V{}
	for nonce, e := range held {
		old := spentHolders(nonce, was, spentCopies)
		for _, h := range spentHolders(nonce, is, spentCopies) {
			if h == self {
				continue
			}
			if epoch, ok := before[h]; ok && epoch == after[h] && slices.Contains(old, h) {
				continue
			}
			if moves[h] == nil {
				moves[h] = map[string]V{}
			}
			moves[h][nonce] = e
		}
	}
	return moves
}
