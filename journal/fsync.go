package journal

import (
	"fmt"

	"github.com/mcpswarm/mcpswarm/internal/coalesce"
)

// run is the background round of Process mode: it fsyncs what rounds
// wrote. (Sync rounds fsync themselves; both compact as they lead.)
func (j *Journal) run() {
	defer close(j.done)
	coalesce.Run(j.stop, j.kick, j.opt.RoundDelay, func() { _ = j.Sync() })
}

// Sync returns once everything written before it is on disk. In Sync mode
// every write already is; in Process mode it fsyncs now rather than at the
// next background round, for a caller that must answer with Sync
// durability this once (a replicated write whose standbys did not answer).
// Concurrent callers share fsyncs: one that an fsync already on disk does
// not cover waits for it, and then one of those waiting fsyncs for all.
func (j *Journal) Sync() error {
	if j.opt.Mode != Process {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.syncLocked(j.records)
}

// syncLocked returns once an fsync that began after the first target
// records were written has ended (or the journal failed). Called with mu
// held; it releases mu while it waits or fsyncs.
func (j *Journal) syncLocked(target uint64) error {
	for j.synced < target && j.failed == nil {
		if j.syncing {
			// Begun before the caller's records may have been written:
			// wait for it, then look again.
			done := j.syncDone
			j.mu.Unlock()
			<-done
			j.mu.Lock()
			continue
		}
		covers, f, done := j.records, j.f, make(chan struct{})
		j.syncing, j.syncDone = true, done
		j.mu.Unlock()
		err := j.opt.fsync(f)
		j.mu.Lock()
		j.syncing = false
		close(done)
		if err != nil {
			j.failLocked(fmt.Errorf("fsync of journal %s: %w", j.dir, err))
			break
		}
		j.synced = max(j.synced, covers)
		j.rounds++
	}
	if j.failed != nil {
		return fmt.Errorf("journal %s refuses writes after an earlier failure: %w", j.dir, j.failed)
	}
	return nil
}
