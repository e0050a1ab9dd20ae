package journal

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// needsCompaction is the compaction rule: a file past the minimum size
// that holds more than twice its live bytes.
func needsCompaction(size, live, minSize int64) bool {
	return size > minSize && size > 2*live
}

// compacted is a compaction's new segment, complete on disk (fsync'd and
// renamed into place), not yet in use.
type compacted struct {
	f     *os.File
	gen   uint64
	end   int64
	index map[string]loc
}

// compactLocked compacts the journal while no one else can reach it (at
// Open). Called with mu held.
func (j *Journal) compactLocked() error {
	c, err := j.writeCompacted(j.f, j.gen, j.liveLocked())
	if err != nil {
		return err
	}
	old, oldGen := j.f, j.gen
	j.install(c)
	j.dropSegment(old, oldGen)
	return nil
}

// compactLeading compacts the journal as the round's leader: holding the
// lead keeps every round off the file, but the copy and its fsyncs run
// without mu, so writers keep joining the next round rather than queueing
// on the lock for the milliseconds compaction takes. Called with mu held
// and leading set; returns with mu held. A failure leaves the old file in
// use and intact; compaction is retried after the next round.
func (j *Journal) compactLeading() {
	src, gen, live, before := j.f, j.gen, j.liveLocked(), j.end
	j.mu.Unlock()
	c, err := j.writeCompacted(src, gen, live)
	j.mu.Lock()
	if err != nil {
		j.log.Warn("compacting journal", "dir", j.dir, "err", err)
		return
	}
	// A Process fsync on the old file must end before it is closed; none
	// starts on it after install (a round handed on meanwhile fsyncs the
	// new file, which holds every record).
	for j.onDisk != nil {
		done := j.onDisk
		j.mu.Unlock()
		<-done
		j.mu.Lock()
	}
	j.install(c)
	j.mu.Unlock()
	j.dropSegment(src, gen)
	j.mu.Lock()
	j.log.Debug("journal compacted", "dir", j.dir, "bytes_before", before, "bytes_after", c.end, "keys", len(c.index))
}

// liveKey is a key's newest record, as compaction copies it.
type liveKey struct {
	key string
	loc
}

// liveLocked lists every key's newest record in key order. Called with mu
// held.
func (j *Journal) liveLocked() []liveKey {
	live := make([]liveKey, 0, len(j.index))
	for k, l := range j.index {
		live = append(live, liveKey{key: k, loc: l})
	}
	slices.SortFunc(live, func(a, b liveKey) int { return cmp.Compare(a.key, b.key) })
	return live
}

// writeCompacted copies live's records from src into the next segment,
// fsyncs it and renames it into place. No round may write to src
// meanwhile. A crash at any step leaves either the old segment or the
// complete new one as the newest (see open).
func (j *Journal) writeCompacted(src *os.File, gen uint64, live []liveKey) (compacted, error) {
	gen++
	path := filepath.Join(j.dir, segmentName(gen))
	tmp := path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return compacted{}, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = nf.Close()
			_ = os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(nf, 1<<16)
	index := make(map[string]loc, len(live))
	var off int64
	for _, lk := range live {
		b := make([]byte, lk.n)
		if _, err := src.ReadAt(b, lk.off); err != nil {
			return compacted{}, fmt.Errorf("reading %q at %d: %w", lk.key, lk.off, err)
		}
		if _, _, err := decode(b); err != nil {
			return compacted{}, fmt.Errorf("record of %q at %d: %w", lk.key, lk.off, err)
		}
		if _, err := w.Write(b); err != nil {
			return compacted{}, err
		}
		index[lk.key] = loc{off: off, n: lk.n}
		off += int64(lk.n)
	}
	if err := w.Flush(); err != nil {
		return compacted{}, err
	}
	if err := j.opt.fsync(nf); err != nil {
		return compacted{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return compacted{}, err
	}
	ok = true
	if err := syncDir(j.dir); err != nil {
		// The rename may not be durable, but both files are whole: keep
		// going with the new one, which open prefers if both survive.
		j.log.Warn("syncing journal dir after compaction", "dir", j.dir, "err", err)
	}
	return compacted{f: nf, gen: gen, end: off, index: index}, nil
}

// install makes c the journal's file. Everything written so far is in it,
// fsync'd. Called with mu held.
func (j *Journal) install(c compacted) {
	j.f, j.gen, j.end, j.alloc, j.index = c.f, c.gen, c.end, c.end, c.index
	j.synced = j.records
}

// dropSegment closes and removes a segment compaction replaced.
func (j *Journal) dropSegment(f *os.File, gen uint64) {
	_ = f.Close()
	path := filepath.Join(j.dir, segmentName(gen))
	if err := os.Remove(path); err != nil {
		j.log.Warn("removing compacted journal segment", "file", path, "err", err)
	}
}
