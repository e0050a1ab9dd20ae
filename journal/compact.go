package journal

import (
	"bufio"
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

func (j *Journal) maybeCompact() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed || j.failed != nil || !needsCompaction(j.end, j.live, j.opt.CompactMin) {
		return
	}
	before := j.end
	if err := j.compactLocked(); err != nil {
		// The old file is intact and still in use: compaction is retried
		// after the next round.
		j.log.Warn("compacting journal", "dir", j.dir, "err", err)
		return
	}
	j.log.Debug("journal compacted", "dir", j.dir, "bytes_before", before, "bytes_after", j.end, "keys", len(j.index))
}

// compactLocked copies every key's newest record into a new segment,
// fsyncs it, renames it into place and drops the old one. Writers wait
// for it (mu is held); Process-mode records not yet fsync'd are copied and
// fsync'd with the rest. A crash at any step leaves either the old segment
// or the complete new one as the newest (see open).
func (j *Journal) compactLocked() error {
	gen := j.gen + 1
	path := filepath.Join(j.dir, segmentName(gen))
	tmp := path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = nf.Close()
			_ = os.Remove(tmp)
		}
	}()
	keys := make([]string, 0, len(j.index))
	for k := range j.index {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w := bufio.NewWriterSize(nf, 1<<16)
	index := make(map[string]loc, len(keys))
	var off int64
	for _, k := range keys {
		l := j.index[k]
		b := make([]byte, l.n)
		if _, err := j.f.ReadAt(b, l.off); err != nil {
			return fmt.Errorf("reading %q at %d: %w", k, l.off, err)
		}
		if _, _, err := decode(b); err != nil {
			return fmt.Errorf("record of %q at %d: %w", k, l.off, err)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		index[k] = loc{off: off, n: l.n}
		off += int64(l.n)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := nf.Sync(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if err := syncDir(j.dir); err != nil {
		// The rename may not be durable, but both files are whole: keep
		// going with the new one, which open prefers if both survive.
		j.log.Warn("syncing journal dir after compaction", "dir", j.dir, "err", err)
	}
	old := j.f
	oldPath := filepath.Join(j.dir, segmentName(j.gen))
	j.f, j.gen, j.end, j.alloc, j.index, j.dirty = nf, gen, off, off, index, false
	_ = old.Close()
	if err := os.Remove(oldPath); err != nil {
		j.log.Warn("removing compacted journal segment", "file", oldPath, "err", err)
	}
	return nil
}
