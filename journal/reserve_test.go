package journal

import (
	"bytes"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/internal/testenv"
)

// crashCopy copies j's segment as a crash would leave it on disk (j stays
// open: nothing is trimmed) into a new directory.
func crashCopy(t *testing.T, j *Journal) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(j.dir, segmentName(j.gen)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// An open journal reserves space past its records, so a round's data sync
// flushes no new file length; a crash leaves that space behind as zeros,
// which reopening reads as the end of the records: every acknowledged
// write is there, nothing is reported torn, and writing goes on after the
// last record.
func TestReservedSpaceIsTheEndAfterACrash(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("space is reserved with fallocate(2) on Linux only")
	}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			j := open(t, t.TempDir(), mode)
			defer j.Close()
			want := map[string]string{}
			for i := range 50 {
				k, v := string(rune('a'+i%7)), strings.Repeat("v", i)
				if err := j.Put(k, []byte(v)); err != nil {
					t.Fatal(err)
				}
				want[k] = v
			}
			st, err := j.f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if !j.prealloc {
				testenv.Skip(t, "this file system refuses fallocate(2)")
			}
			if end := j.Stats().Size; st.Size() <= end {
				t.Fatalf("file is %d bytes for %d bytes of records: nothing reserved", st.Size(), end)
			}

			var log bytes.Buffer
			dir := crashCopy(t, j)
			r, err := Open(dir, Options{Mode: mode, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if got := contents(t, r); !maps.Equal(got, want) {
				t.Fatalf("after the crash: %v, want %v", got, want)
			}
			if strings.Contains(log.String(), "torn") {
				t.Fatalf("reserved zeros were reported as a torn tail: %s", log.String())
			}
			if err := r.Put("after", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			r = open(t, dir, mode)
			defer r.Close()
			want["after"] = "x"
			if got := contents(t, r); !maps.Equal(got, want) {
				t.Fatalf("after a write and a reopen: %v, want %v", got, want)
			}
		})
	}
}

// A record that never was acknowledged (its round's header did not reach
// the disk before the crash, a later record of the round did) lies past
// the end among the reserved zeros. It must never come back: not at the
// reopen, and not after a later write ends exactly where it begins, which
// would make it read as newer than that write.
func TestAStaleRecordPastTheEndNeverReturns(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, Sync)
	if err := j.Put("k", []byte("acknowledged")); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segmentName(1))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(data)
	// The next write will be this record: it ends at end+len(next).
	next := appendRecord(nil, record{key: "k", value: []byte("newest")})
	stale := appendRecord(nil, record{key: "k", value: []byte("never acknowledged")})
	img := append(data, make([]byte, len(next))...) // the lost header and its record
	img = append(img, stale...)
	img = append(img, make([]byte, 4096)...) // reserved zeros
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	j, err = Open(dir, Options{Mode: Sync, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(t, j); got["k"] != "acknowledged" {
		t.Fatalf("at the reopen k is %q", got["k"])
	}
	if !strings.Contains(log.String(), "torn") {
		t.Fatalf("bytes past the end were not reported: %q", log.String())
	}
	if err := j.Put("k", []byte("newest")); err != nil {
		t.Fatal(err)
	}
	if j.Stats().Size != int64(end+len(next)) {
		t.Fatalf("the write ended at %d, the test meant %d", j.Stats().Size, end+len(next))
	}
	dir2 := crashCopy(t, j) // a crash now: no trim at Close
	_ = j.Close()
	j = open(t, dir2, Sync)
	defer j.Close()
	if got := contents(t, j); got["k"] != "newest" {
		t.Fatalf("after a crash, k is %q: the stale record came back", got["k"])
	}
}
