package mcpswarm

import (
	"encoding/json"
	"fmt"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// snapshotBucket is the node-local bucket of session snapshots in the
// node's bbolt file. It is not a replicated registry: models stay on their
// owner; other nodes see only the session and tool records.
const snapshotBucket = "snapshots"

// snapshotStore keeps session snapshots in the node's bbolt file, so a
// restarted owner restores its sessions with their models.
type snapshotStore struct{ st cluster.Storage }

func (s snapshotStore) Save(snap session.Snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encoding snapshot of %s: %w", snap.Info.ID, err)
	}
	return s.st.Write(snapshotBucket, snap.Info.ID, b, func() error { return nil })
}

func (s snapshotStore) Delete(id string) error {
	return s.st.Write(snapshotBucket, id, nil, func() error { return nil })
}

func (s snapshotStore) Load() ([]session.Snapshot, error) {
	var out []session.Snapshot
	err := s.st.Load(snapshotBucket, func(key string, value []byte) error {
		var snap session.Snapshot
		if err := json.Unmarshal(value, &snap); err != nil {
			return fmt.Errorf("decoding snapshot %s: %w", key, err)
		}
		out = append(out, snap)
		return nil
	})
	return out, err
}

var _ session.Store = snapshotStore{}
