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

// syncRound is one shared fsync of Process mode: the Sync callers that
// found an fsync already on disk, which may not cover their writes, wait
// for the one after it. The leader of the fsync on disk hands this one
// to one of them (lead), who fsyncs for all and then closes done: each
// caller is woken once, by the fsync that covers it.
type syncRound struct {
	done chan struct{}
	lead chan struct{} // buffered: sent once, by the leader before
}

// Sync returns once everything written before it is on disk. In Sync mode
// every write already is; in Process mode it fsyncs now rather than at the
// next background round, for a caller that must answer with Sync
// durability this once (a replicated write whose standbys did not answer).
// Concurrent callers share fsyncs: one that an fsync already on disk does
// not cover waits for the next one, which one of those waiting leads for
// all of them.
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
		if !j.syncing {
			j.syncing = true
			j.leadSyncLocked(nil)
			continue
		}
		// The fsync on disk (or handed on) began before the caller's
		// records may have been written: wait for the next one.
		rd := j.nextSync
		if rd == nil {
			rd = &syncRound{done: make(chan struct{}), lead: make(chan struct{}, 1)}
			j.nextSync = rd
		}
		j.mu.Unlock()
		select {
		case <-rd.done:
			j.mu.Lock()
		case <-rd.lead:
			j.mu.Lock()
			j.leadSyncLocked(rd)
		}
	}
	if j.failed != nil {
		return fmt.Errorf("journal %s refuses writes after an earlier failure: %w", j.dir, j.failed)
	}
	return nil
}

// leadSyncLocked fsyncs everything written so far for rd's callers (none:
// a caller that found no fsync in progress), wakes them, and hands the
// next round, if any caller waits for it, to one of its callers; the
// journal stays syncing until a round ends with no one waiting. Called
// and returns with mu held and syncing set; mu is released for the fsync.
func (j *Journal) leadSyncLocked(rd *syncRound) {
	covers, f, onDisk := j.records, j.f, make(chan struct{})
	j.onDisk = onDisk
	j.mu.Unlock()
	err := j.opt.fsync(f)
	j.mu.Lock()
	j.onDisk = nil
	close(onDisk)
	if err != nil {
		j.failLocked(fmt.Errorf("fsync of journal %s: %w", j.dir, err))
	} else {
		j.synced = max(j.synced, covers)
		j.rounds++
	}
	if rd != nil {
		close(rd.done)
	}
	next := j.nextSync
	switch {
	case next == nil:
		j.syncing = false
	case j.failed != nil:
		j.nextSync, j.syncing = nil, false
		close(next.done) // they find the failure
	default:
		j.nextSync = nil
		next.lead <- struct{}{}
	}
}
