package swarm

import (
	"context"
	"fmt"
)

// PublishStandbys writes the records of local sessions ids with their
// in-sync standbys as they are now and waits until every live peer has
// applied them, or has lost its lease on this node's writes (cluster
// Registry.AwaitPeers). An owner calls it before it answers a write on its
// own durability after a standby left the in-sync set: once the answer is
// out, no node may still read a record that names that standby, which
// would let it take the session over without the write. One wait covers
// every record.
func (s *Swarm) PublishStandbys(ctx context.Context, ids ...string) error {
	for _, id := range ids {
		info, ok := s.mgr.Get(id)
		if !ok {
			continue // not started yet: its first record comes with its start
		}
		if err := s.publishRecord(info); err != nil {
			return fmt.Errorf("publishing the standbys of %s: %w", id, err)
		}
	}
	if err := s.sessions.AwaitPeers(ctx); err != nil {
		return fmt.Errorf("the standbys of %v: %w", ids, err)
	}
	return nil
}
