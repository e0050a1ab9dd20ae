package mcpswarm

import (
	"fmt"
	"strconv"

	"github.com/mcpswarm/mcpswarm/journal"
)

// Durability says when a call that changed a session is answered.
type Durability int

// The durability modes (--durability).
const (
	// DurabilitySync answers after an fsync'd group commit on the owner:
	// survives kill -9 and the loss of power to every machine.
	DurabilitySync Durability = iota + 1
	// DurabilityProcess answers after the owner's write(2): survives kill
	// -9 of the node, not a crash of its machine.
	DurabilityProcess
	// DurabilityReplica answers after the owner's write(2) and the
	// acknowledgement of every in-sync standby (fsync on both in the
	// background): survives kill -9 of the owner and the loss of its
	// machine with its disk. With no standby to hold the write (a lone
	// node, or every standby out of sync) it answers as DurabilitySync.
	DurabilityReplica
)

var durabilityNames = map[Durability]string{DurabilitySync: "sync", DurabilityProcess: "process", DurabilityReplica: "replica"}

// String returns the mode's flag spelling.
func (d Durability) String() string {
	if s, ok := durabilityNames[d]; ok {
		return s
	}
	return "Durability(" + strconv.Itoa(int(d)) + ")"
}

// Valid reports whether d is one of the modes.
func (d Durability) Valid() bool { _, ok := durabilityNames[d]; return ok }

// MarshalText implements encoding.TextMarshaler.
func (d Durability) MarshalText() ([]byte, error) {
	if d == 0 {
		return nil, nil
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Durability) UnmarshalText(b []byte) error {
	for m, s := range durabilityNames {
		if string(b) == s {
			*d = m
			return nil
		}
	}
	return fmt.Errorf("durability %q is not one of sync, process, replica", b)
}

// journalMode is how the owner's own journal writes under d: replica
// writes with write(2) and relies on the standbys (or an explicit sync when
// none holds the write).
func (d Durability) journalMode() journal.Mode {
	if d == DurabilitySync {
		return journal.Sync
	}
	return journal.Process
}

// effective resolves the zero Durability: replica where sessions have
// standbys, sync otherwise.
func (d Durability) effective(replicas int) Durability {
	if d != 0 {
		return d
	}
	if replicas > 0 {
		return DurabilityReplica
	}
	return DurabilitySync
}
