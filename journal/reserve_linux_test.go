//go:build linux

package journal

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/mcpswarm/mcpswarm/internal/testenv"
)

// On a disk with less room than a reserve (a 1 MiB tmpfs: fallocate(2) of
// 4 MiB answers ENOSPC) the journal says so once and appends as before:
// every write is taken, and a reopen reads them all.
func TestAJournalThatCannotReserveAppends(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Skip(t, "mounting a small tmpfs needs root (and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, 0) })
	var log bytes.Buffer
	j, err := Open(dir, Options{Mode: Sync, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 200 {
		k, v := string(rune('a'+i%13)), strings.Repeat("x", i)
		if err := j.Put(k, []byte(v)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		want[k] = v
	}
	if j.prealloc {
		t.Fatal("a 4 MiB reserve succeeded on a 1 MiB file system")
	}
	if n := strings.Count(log.String(), "cannot reserve"); n != 1 {
		t.Fatalf("the refusal was logged %d times: %s", n, log.String())
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir, Sync)
	defer j.Close()
	if got := contents(t, j); !maps.Equal(got, want) {
		t.Fatalf("after a reopen: %v, want %v", got, want)
	}
}

// The reserved space is written zeros, not only allocated blocks: ext4
// marks fallocate(2)'s blocks "unwritten", and the first write into each
// one is a metadata change that its fdatasync must commit to the file
// system's own journal (on this VM's disk that cost a third more CPU and
// latency per sync). After the first round no extent of the live file
// may still be unwritten.
func TestReservedSpaceIsWrittenZeros(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Sync)
	defer j.Close()
	if err := j.Put("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	f, alloc, end := j.f, j.alloc, j.end
	j.mu.Unlock()
	if !j.prealloc || alloc < end+preallocChunk/2 {
		testenv.Skip(t, "this file system reserves no space (alloc %d, end %d)", alloc, end)
	}
	extents, err := fiemap(f)
	if err != nil {
		testenv.Skip(t, "this file system maps no extents: %v", err)
	}
	var covered int64
	for _, e := range extents {
		if e.flags&fiemapExtentUnwritten != 0 {
			t.Fatalf("extent at %d (%d bytes) of the reserved file is unwritten", e.logical, e.length)
		}
		covered += int64(e.length)
	}
	if covered < alloc {
		t.Fatalf("extents cover %d bytes of the %d reserved", covered, alloc)
	}
}

type extent struct {
	logical, length uint64
	flags           uint32
}

// fiemapExtentUnwritten is FIEMAP_EXTENT_UNWRITTEN (linux/fiemap.h).
const fiemapExtentUnwritten = 0x800

// fiemap lists f's extents with the FS_IOC_FIEMAP ioctl, after syncing
// it (FIEMAP_FLAG_SYNC), so delayed allocation shows as real extents.
func fiemap(f *os.File) ([]extent, error) {
	const (
		fsIOCFiemap   = 0xC020660B // _IOWR('f', 11, struct fiemap)
		flagSync      = 0x1
		headSize      = 32
		extentSize    = 56
		maxExtents    = 256
		extentFlagsAt = 40 // fe_flags within struct fiemap_extent
	)
	buf := make([]byte, headSize+maxExtents*extentSize)
	le := binary.LittleEndian
	le.PutUint64(buf[8:], ^uint64(0)) // fm_length: the whole file
	le.PutUint32(buf[16:], flagSync)
	le.PutUint32(buf[24:], maxExtents)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIOCFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
		return nil, errno
	}
	n := le.Uint32(buf[20:])
	out := make([]extent, n)
	for i := range out {
		e := buf[headSize+i*extentSize:]
		out[i] = extent{logical: le.Uint64(e[0:]), length: le.Uint64(e[16:]), flags: le.Uint32(e[extentFlagsAt:])}
	}
	return out, nil
}
