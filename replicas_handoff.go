package mcpswarm

import (
	"encoding/json"
	"fmt"

	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/standby"
)

// HandOver implements swarm.Standbys: the holder's copy, decoded and
// checked by accept under the holder's lock (so no ship can replace it in
// between), with its epoch raised by one.
func (r *replicas) HandOver(id, owner string, epoch uint64, accept func(session.Snapshot) error) (session.Snapshot, func(), error) {
	var snap session.Snapshot
	c, undo, err := r.holder.HandOver(id, owner, epoch, func(c standby.Copy) error {
		if err := json.Unmarshal(c.Snapshot, &snap); err != nil {
			return fmt.Errorf("decoding the standby copy: %w", err)
		}
		return accept(snap)
	})
	if err != nil {
		return session.Snapshot{}, nil, err
	}
	snap.Info.Handoff = c.Epoch + 1
	return snap, undo, nil
}
