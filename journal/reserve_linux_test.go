//go:build linux

package journal

import (
	"bytes"
	"log/slog"
	"maps"
	"strings"
	"syscall"
	"testing"
)

// On a disk with less room than a reserve (a 1 MiB tmpfs: fallocate(2) of
// 4 MiB answers ENOSPC) the journal says so once and appends as before:
// every write is taken, and a reopen reads them all.
func TestAJournalThatCannotReserveAppends(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a small tmpfs needs root: %v", err)
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
