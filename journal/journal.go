package journal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/coalesce"
)

// Mode says when Put and Delete return; see the package documentation.
type Mode int

// The durability modes.
const (
	Sync Mode = iota + 1
	Process
)

// String returns the mode's flag spelling.
func (m Mode) String() string {
	switch m {
	case Sync:
		return "sync"
	case Process:
		return "process"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool { return m == Sync || m == Process }

// ParseMode reads a mode's flag spelling.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Sync, Process} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("durability %q is not one of sync, process", s)
}

// Options configures a Journal. Zero fields take the defaults noted.
type Options struct {
	// Mode says when writes return (default Sync).
	Mode Mode
	// RoundDelay is how long a Process round gathers writes before it
	// fsyncs them (default 2 ms). Fewer fsyncs leave write(2) fewer
	// chances to wait for pages under writeback.
	RoundDelay time.Duration
	// Gather is how long a Sync round whose predecessors held several
	// writes may wait for writers to join it before it commits (default
	// DefaultGather; see gathering for how many it waits for). Under
	// concurrent writers it makes each fdatasync serve more of them; a
	// lone writer, whose rounds hold one write, never waits.
	Gather time.Duration
	// CompactMin is the file size below which the journal is never
	// compacted (default 4 MiB); above it, the file is compacted once it
	// holds more than twice its live bytes.
	CompactMin int64
	// Logger receives torn-tail and compaction reports; nil uses
	// slog.Default().
	Logger *slog.Logger
	// fsync stands in for fdatasync in tests (nil: datasync), to see what
	// each sync covers and to hold one on disk.
	fsync func(*os.File) error
}

// ErrClosed is returned by Put, Delete and Load after Close.
var ErrClosed = errors.New("journal: closed")

// loc is where a key's newest record lies in the file.
type loc struct {
	off int64
	n   int
}

// entry is a queued record's key and place within its round.
type entry struct {
	key string
	rel int64
	n   int
	del bool
}

// roundBufs are a round's records, encoded, and their places.
type roundBufs struct {
	buf     []byte
	entries []entry
}

// round is one group commit: the records queued while the previous round
// was on disk, and the callers waiting for them.
type round struct {
	roundBufs
	done chan struct{}
	err  error
	// lead hands the commit of this round to one of its writers (Sync):
	// the leader of the round before sends once, the first writer to
	// receive commits for all.
	lead chan struct{}
	// full is closed when the round holds want entries (gatherLocked);
	// timedOut records that Gather ended the wait short of them.
	full     chan struct{}
	want     int
	timedOut bool
	// synced is set when a writer of the round asked for it to be on
	// disk before it returns (PutSynced): the round is fsynced, as in
	// Sync mode, whatever the journal's mode.
	synced bool
}

// Journal is an open journal directory. It is safe for concurrent use.
type Journal struct {
	dir string
	opt Options
	log *slog.Logger

	mu     sync.Mutex // guards everything below
	gather gathering  // how long Sync rounds wait for writers
	f      *os.File
	gen    uint64
	end    int64
	// alloc is the file's length, at least end: the bytes past end are
	// preallocated zeros (see reserve). prealloc is cleared when the file
	// system refuses to preallocate; the journal then appends.
	alloc    int64
	prealloc bool
	index    map[string]loc
	live     int64
	failed   error  // set by an I/O failure that leaves the file's state unknown: every later write refuses
	next     *round // Sync: the round being gathered
	// leading is set while a Sync writer commits a round for its group
	// (and until it hands over to the next round's writers); idle is
	// signalled when it clears.
	leading bool
	idle    *sync.Cond
	// spares hold the buffers of committed rounds for the next ones: a
	// round's bytes are dead once written, and a fresh buffer per round
	// was the node's largest allocation under a click load. Two, because
	// a round gathers while the one before it is on disk. Kept up to
	// maxSpare.
	spares []roundBufs
	// solo and soloEntry are the lead's buffers for a Process write that
	// finds no round in progress (writeAlone).
	solo      []byte
	soloEntry [1]entry
	rounds    uint64 // fsyncs of written records
	records   uint64 // records written (Sync: committed; Process: appended)
	// Process mode's fsyncs (Sync and the background round) are a group
	// commit of their own (fsync.go): synced is how many of records a
	// finished fsync covers; syncing is set while a round leads, from its
	// fsync until it hands on to the next; nextSync gathers the callers
	// waiting for the next round; onDisk is closed when the fsync in
	// flight, if any, returns.
	synced   uint64
	syncing  bool
	nextSync *syncRound
	onDisk   chan struct{}
	closing  bool // Close has begun: writes refuse
	closed   bool // the file is closed

	kick coalesce.Signal
	stop chan struct{}
	done chan struct{}
}

const suffix = ".log"

// DefaultGather is Options.Gather's default: well under one fdatasync of
// a cloud disk (150–450 µs here), so a round waits for writers already on
// their way, not for the next burst.
const DefaultGather = 200 * time.Microsecond

// maxSpare bounds the buffer a journal keeps between rounds: a round that
// carried one large snapshot does not pin its buffer for the node's life.
const maxSpare = 256 << 10

// preallocChunk is how far past its end the journal reserves its file at
// a time: one metadata-changing round per chunk, every other round only
// writes data.
const preallocChunk = 4 << 20

func segmentName(gen uint64) string { return fmt.Sprintf("%016x%s", gen, suffix) }

// Open opens (or creates) the journal in dir, replays it and starts its
// background round. A torn tail is cut off and reported in the log.
func Open(dir string, opt Options) (*Journal, error) {
	if opt.Mode == 0 {
		opt.Mode = Sync
	}
	if !opt.Mode.Valid() {
		return nil, fmt.Errorf("opening journal %s: unknown mode %d", dir, opt.Mode)
	}
	if opt.RoundDelay <= 0 {
		opt.RoundDelay = 2 * time.Millisecond
	}
	if opt.Gather <= 0 {
		opt.Gather = DefaultGather
	}
	if opt.CompactMin <= 0 {
		opt.CompactMin = 4 << 20
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.fsync == nil {
		opt.fsync = datasync
	}
	j := &Journal{dir: dir, opt: opt, log: opt.Logger, index: map[string]loc{}, prealloc: true,
		kick: coalesce.NewSignal(), stop: make(chan struct{}), done: make(chan struct{})}
	j.idle = sync.NewCond(&j.mu)
	if err := j.open(); err != nil {
		return nil, fmt.Errorf("opening journal %s: %w", dir, err)
	}
	go j.run()
	return j, nil
}

// open finds the newest segment, drops older ones and leftovers of an
// interrupted compaction, and replays it.
func (j *Journal) open() error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return err
	}
	des, err := os.ReadDir(j.dir)
	if err != nil {
		return err
	}
	var gens []uint64
	for _, de := range des {
		name := de.Name()
		if strings.HasSuffix(name, suffix+".tmp") {
			// A compaction that did not finish: its source is still here.
			if err := os.Remove(filepath.Join(j.dir, name)); err != nil {
				return err
			}
			continue
		}
		if g, err := strconv.ParseUint(strings.TrimSuffix(name, suffix), 16, 64); err == nil && strings.HasSuffix(name, suffix) {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	j.gen = 1
	if len(gens) > 0 {
		j.gen = gens[len(gens)-1]
	}
	// An older segment remains only if a compaction was interrupted after
	// renaming its result into place: the newest holds everything.
	for _, g := range gens[:max(len(gens)-1, 0)] {
		if err := os.Remove(filepath.Join(j.dir, segmentName(g))); err != nil {
			return err
		}
	}
	path := filepath.Join(j.dir, segmentName(j.gen))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := j.replay(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("replaying %s: %w", path, err)
	}
	j.f = f
	if err := syncDir(j.dir); err != nil {
		return err
	}
	if needsCompaction(j.end, j.live, j.opt.CompactMin) {
		if err := j.compactLocked(); err != nil {
			j.log.Warn("compacting journal at open", "dir", j.dir, "err", err)
		}
	}
	return nil
}

// replay indexes f's records and cuts a torn tail.
func (j *Journal) replay(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<16)
	var off int64
	hdr := make([]byte, headerSize)
	var why error
	zeros := false // the records end where the file's preallocated zeros begin
	for {
		if n, err := io.ReadFull(r, hdr); err != nil {
			switch {
			case err == io.EOF:
			case allZero(hdr[:n]):
				zeros = true
			default:
				why = fmt.Errorf("header cut at %d: %w", off, errTorn)
			}
			break
		}
		if allZero(hdr) {
			zeros = true
			break
		}
		n, err := bodyLen(hdr)
		if err == nil && off+headerSize+int64(n) > st.Size() {
			err = fmt.Errorf("record of %d bytes at %d runs past the end: %w", headerSize+n, off, errTorn)
		}
		if err != nil {
			why = err
			break
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return fmt.Errorf("reading record at %d: %w", off, err)
		}
		rec, err := decodeBody(hdr, body)
		if err != nil {
			why = err
			break
		}
		j.apply(rec.key, off, headerSize+n, rec.del)
		off += int64(headerSize + n)
	}
	if zeros {
		// Space reserved past the records (reserve) that a crash left
		// behind: kept as it is when it holds nothing but zeros. Anything
		// else there is cut off with a torn tail's warning, so that no
		// stale record past the end can line up with a later write's end
		// and be read back as newer than it.
		clean, err := onlyZeros(r)
		if err != nil {
			return fmt.Errorf("reading past the last record at %d: %w", off, err)
		}
		if clean {
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				return err
			}
			j.end, j.alloc = off, st.Size()
			return nil
		}
		why = fmt.Errorf("bytes other than reserved zeros past the last record at %d: %w", off, errTorn)
	}
	if why != nil {
		j.log.Warn("journal tail is torn or corrupt; cutting it off (only writes not yet acknowledged can end there)",
			"file", f.Name(), "valid_bytes", off, "dropped_bytes", st.Size()-off, "reason", why)
		if err := f.Truncate(off); err != nil {
			return fmt.Errorf("cutting torn tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("syncing after cutting torn tail: %w", err)
		}
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	j.end, j.alloc = off, off
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// onlyZeros reads r to its end and reports whether every byte was zero.
func onlyZeros(r io.Reader) (bool, error) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if !allZero(buf[:n]) {
			return false, nil
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// apply records that key's newest record is n bytes at off (or that key
// was deleted there). Called with mu held, or before the journal is shared.
func (j *Journal) apply(key string, off int64, n int, del bool) {
	if old, ok := j.index[key]; ok {
		j.live -= int64(old.n)
		delete(j.index, key)
	}
	if !del {
		j.index[key] = loc{off: off, n: n}
		j.live += int64(n)
	}
}

// Put stores value as key's newest value and returns when it is as durable
// as the journal's Mode promises. It copies value and keeps no reference
// to it, so the caller may reuse value's memory once Put returns.
func (j *Journal) Put(key string, value []byte) error {
	if err := validate(key, value); err != nil {
		return err
	}
	return j.write(record{key: key, value: value}, false)
}

// PutSynced is Put, but returns only once the record is on disk
// (fdatasync returned), whatever the journal's Mode: in Process mode, for
// a write that nothing else will hold (a replicated session with no
// standby), so it goes to disk in one group commit of write and
// fdatasync, as in Sync mode, rather than a write(2) followed by Sync.
// Process writes that join its round return after the fdatasync too.
func (j *Journal) PutSynced(key string, value []byte) error {
	if err := validate(key, value); err != nil {
		return err
	}
	return j.write(record{key: key, value: value}, true)
}

// Delete removes key, with the same durability as Put.
func (j *Journal) Delete(key string) error {
	if err := validate(key, nil); err != nil {
		return err
	}
	return j.write(record{key: key, del: true}, false)
}

// write queues rec in the round being gathered (or, in Process mode with
// no round in progress and no fsync asked for, writes it alone) and
// returns when that round is written, and fsynced if Mode is Sync or
// synced is set.
func (j *Journal) write(rec record, synced bool) error {
	j.mu.Lock()
	if err := j.usable(); err != nil {
		j.mu.Unlock()
		return err
	}
	if j.opt.Mode == Process && !synced && !j.leading {
		j.leading = true
		return j.writeAlone(rec)
	}
	rd := j.next
	if rd == nil {
		rd = &round{done: make(chan struct{}), lead: make(chan struct{}, 1)}
		if n := len(j.spares); n > 0 {
			rd.roundBufs, j.spares = j.spares[n-1], j.spares[:n-1]
		}
		j.next = rd
	}
	rd.synced = rd.synced || synced
	rel := int64(len(rd.buf))
	rd.buf = appendRecord(rd.buf, rec)
	rd.entries = append(rd.entries, entry{key: rec.key, rel: rel, n: len(rd.buf) - int(rel), del: rec.del})
	if rd.full != nil && len(rd.entries) >= rd.want {
		close(rd.full)
		rd.full = nil
	}
	// A group write led by the writers themselves (no hand-off to a
	// goroutine and back), in both modes: with no round in progress this
	// writer writes its round now; otherwise it waits for its round to be
	// written by another writer of it, or to be handed the lead. Nobody
	// holds mu across write(2) or fdatasync: a writer that the kernel
	// holds up there (a timestamp update waiting for the file system's
	// journal commit) holds up only the writers of its round, who would
	// have waited for the file anyway, and none of them queues on a lock.
	if !j.leading {
		j.leading = true
		j.gatherLocked(rd)
		j.leadLocked()
		return rd.err
	}
	j.mu.Unlock()
	select {
	case <-rd.done:
	case <-rd.lead:
		j.mu.Lock()
		j.gatherLocked(rd)
		j.leadLocked()
	}
	return rd.err
}

// gatherLocked waits, up to Options.Gather, for rd to hold the writes
// j.gather asks for (none for a lone writer; see gathering), so one
// fdatasync serves as many writers as their concurrency allows. Called
// and returns with mu held; the commit is not in progress, so writers
// arriving meanwhile join rd. Process rounds have no fdatasync to share
// and never wait.
func (j *Journal) gatherLocked(rd *round) {
	if !j.fsyncs(rd) {
		return
	}
	want := j.gather.want(len(rd.entries))
	if want == 0 {
		return
	}
	rd.want, rd.full = want, make(chan struct{})
	full := rd.full
	j.mu.Unlock()
	t := time.NewTimer(j.opt.Gather)
	select {
	case <-full:
	case <-t.C:
	}
	t.Stop()
	j.mu.Lock()
	rd.full = nil
	rd.timedOut = len(rd.entries) < want
}

// leadLocked commits the gathered round as its group's leader, then
// finishes the lead (finishLeadLocked); it unlocks mu. Called with mu held
// and leading set.
func (j *Journal) leadLocked() {
	rd := j.next
	j.next = nil
	fsync := j.fsyncs(rd)
	if fsync {
		j.gather.committed(len(rd.entries), rd.timedOut)
	}
	rd.err = j.commitLocked(rd.buf, rd.entries, fsync)
	j.recycleLocked(rd)
	close(rd.done)
	j.finishLeadLocked(!fsync)
}

// fsyncs reports whether round rd is fsynced as it is committed.
func (j *Journal) fsyncs(rd *round) bool { return j.opt.Mode == Sync || rd.synced }

// writeAlone writes rec as a round of its own, from a buffer the lead
// keeps (Process mode, no round in progress): an unhurried writer builds
// no round and wakes no one. Called with mu held and leading set; it
// unlocks mu.
func (j *Journal) writeAlone(rec record) error {
	j.solo = appendRecord(j.solo[:0], rec)
	j.soloEntry[0] = entry{key: rec.key, n: len(j.solo), del: rec.del}
	err := j.commitLocked(j.solo, j.soloEntry[:], false)
	j.soloEntry[0] = entry{} // drop the key
	if cap(j.solo) > maxSpare {
		j.solo = nil
	}
	j.finishLeadLocked(true)
	return err
}

// finishLeadLocked ends a lead after its round: it asks the background
// round to fsync Process writes (unsynced: the round was not fsynced),
// compacts the file when it is due (still
// leading, so no round writes meanwhile, but without mu, so writers keep
// joining the next round), then hands the lead to the next round's
// writers, if any; it unlocks mu. Called with mu held and leading set.
func (j *Journal) finishLeadLocked(unsynced bool) {
	if unsynced && j.opt.Mode == Process {
		j.wake()
	}
	if !j.closing && j.failed == nil && needsCompaction(j.end, j.live, j.opt.CompactMin) {
		j.compactLeading()
	}
	if j.next != nil {
		j.next.lead <- struct{}{} // buffered, sent once per round
	} else {
		j.leading = false
		j.idle.Broadcast()
	}
	j.mu.Unlock()
}

func (j *Journal) usable() error {
	if j.closed || j.closing {
		return ErrClosed
	}
	if j.failed != nil {
		return fmt.Errorf("journal %s refuses writes after an earlier failure: %w", j.dir, j.failed)
	}
	return nil
}

// recycleLocked keeps a committed round's buffers for the next round.
// Callers hold mu; rd's writers read only rd.err from here on.
func (j *Journal) recycleLocked(rd *round) {
	if cap(rd.buf) <= maxSpare && len(j.spares) < 2 {
		clear(rd.entries) // drop the keys' strings
		j.spares = append(j.spares, roundBufs{buf: rd.buf[:0], entries: rd.entries[:0]})
	}
	rd.roundBufs = roundBufs{}
}

// reserve preallocates f past base when n bytes written there would run
// past alloc, what is allocated, and returns the new allocation and
// whether preallocation still works here. Writes within the allocation
// change no file length, so datasync need not flush the inode's metadata
// for them (the round that preallocates flushes the new length). A file
// system that refuses (EOPNOTSUPP, or no room) leaves the journal
// appending as before.
func (j *Journal) reserve(f *os.File, base, n, alloc int64, prealloc bool) (int64, bool) {
	if !prealloc || base+n <= alloc {
		return alloc, prealloc
	}
	size := max(preallocChunk, n)
	if err := preallocate(f, base, size); err != nil {
		j.log.Info("journal cannot reserve space ahead; appending instead", "dir", j.dir, "err", err)
		return alloc, false
	}
	return base + size, true
}

func (j *Journal) wake() { j.kick.Kick() }

// commitLocked writes a round's records (and fsyncs them, with fsync) at
// the end of the file. Only the leader commits, one at a time, so the
// file and its end stay put while mu is released for the I/O. Called and
// returns with mu held.
func (j *Journal) commitLocked(buf []byte, entries []entry, fsync bool) error {
	if j.failed != nil {
		return fmt.Errorf("journal %s refuses writes after an earlier failure: %w", j.dir, j.failed)
	}
	f, base, alloc, prealloc := j.f, j.end, j.alloc, j.prealloc
	j.mu.Unlock()
	alloc, prealloc = j.reserve(f, base, int64(len(buf)), alloc, prealloc)
	_, werr := f.WriteAt(buf, base)
	var serr error
	if werr == nil && fsync {
		serr = j.opt.fsync(f)
	}
	j.mu.Lock()
	j.prealloc = prealloc
	j.alloc = max(alloc, base)
	switch {
	case werr != nil:
		err := fmt.Errorf("appending to journal %s: %w", j.dir, werr)
		if terr := f.Truncate(base); terr != nil {
			j.failed = fmt.Errorf("%w; additionally, cutting it back: %v", err, terr)
		}
		j.alloc = base
		return err
	case serr != nil:
		err := fmt.Errorf("fsync of journal %s: %w", j.dir, serr)
		j.failLocked(err)
		return err
	}
	for _, e := range entries {
		j.apply(e.key, base+e.rel, e.n, e.del)
	}
	j.end = base + int64(len(buf))
	j.alloc = max(j.alloc, j.end)
	j.records += uint64(len(entries))
	if fsync {
		// Every record before this round's was written before its
		// fdatasync began.
		j.rounds++
		j.synced = j.records
	}
	return nil
}

// failLocked makes every later write refuse: after a failed fsync the
// kernel may have dropped the dirty pages, so what the file holds is
// unknown. Called with mu held.
func (j *Journal) failLocked(err error) {
	if j.failed == nil {
		j.failed = err
	}
	j.log.Error("journal failed; refusing further writes", "err", err)
}

// Load calls fn with every key's newest value, in key order. Values are
// read from disk, so Load is for start-up, not the hot path.
func (j *Journal) Load(fn func(key string, value []byte) error) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	keys := make([]string, 0, len(j.index))
	for k := range j.index {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	locs := make([]loc, len(keys))
	for i, k := range keys {
		locs[i] = j.index[k]
	}
	f := j.f
	j.mu.Unlock()
	for i, k := range keys {
		rec, err := readRecord(f, locs[i])
		if err != nil {
			return fmt.Errorf("reading %q from journal %s: %w", k, j.dir, err)
		}
		if err := fn(k, rec.value); err != nil {
			return err
		}
	}
	return nil
}

func readRecord(f *os.File, l loc) (record, error) {
	b := make([]byte, l.n)
	if _, err := f.ReadAt(b, l.off); err != nil {
		return record{}, err
	}
	rec, _, err := decode(b)
	return rec, err
}

// Stats describes the journal's file.
type Stats struct {
	// Keys is how many keys have a value.
	Keys int
	// Live is the bytes of their newest records.
	Live int64
	// Size is the file's length: live bytes plus superseded records.
	Size int64
	// Rounds counts the fsyncs of written records since Open (group
	// commits in Sync mode).
	Rounds uint64
	// Records counts the records (puts and deletes) written since Open:
	// in Sync mode those committed by the Rounds, so Records / Rounds is
	// the group commit's size; in Process mode those appended.
	Records uint64
}

// Stats returns the journal's current figures.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Stats{Keys: len(j.index), Live: j.live, Size: j.end, Rounds: j.rounds, Records: j.records}
}

// Close commits what is pending, fsyncs, and closes the file. Later calls
// answer ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		return nil
	}
	j.closing = true // writes refuse from here; the last round still commits
	for j.leading {  // a round being written: its writers were told to wait for it
		j.idle.Wait()
	}
	j.mu.Unlock()
	close(j.stop)
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	err := j.failed
	if err == nil && j.alloc > j.end {
		// A cleanly closed journal ends at its last record, as a journal
		// of a release that reserves no space expects to find it.
		if terr := j.f.Truncate(j.end); terr != nil {
			err = fmt.Errorf("trimming journal %s to its records: %w", j.dir, terr)
		} else if serr := j.f.Sync(); serr != nil {
			err = fmt.Errorf("fsync of journal %s: %w", j.dir, serr)
		}
	}
	if cerr := j.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("closing journal %s: %w", j.dir, cerr)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// MarshalText implements encoding.TextMarshaler, for flags and config files.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseMode.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
