//go:build linux

package journal

import (
	"fmt"
	"os"
	"syscall"
)

// preallocate gives f disk blocks from off to off+n, extends its length to
// there (fallocate mode 0) and writes zeros over them. fallocate alone
// leaves the blocks "unwritten" in ext4's extent tree, so the first write
// into each one still changes metadata that its data sync must commit to
// the file system's journal; written zeros make every later write inside
// the range a pure data write (see the package documentation for what
// each step saved). The zeros reach the disk with the next data sync.
func preallocate(f *os.File, off, n int64) error {
	if err := control(f, "fallocate", func(fd int) error { return syscall.Fallocate(fd, 0, off, n) }); err != nil {
		return err
	}
	zeros := make([]byte, min(n, zeroChunk))
	for done := int64(0); done < n; {
		k := min(n-done, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:k], off+done); err != nil {
			return fmt.Errorf("writing zeros over the reserved space: %w", err)
		}
		done += k
	}
	return nil
}

// zeroChunk is the largest write preallocate makes of zeros.
const zeroChunk = 256 << 10

// datasync flushes f's data and the metadata needed to read it back
// (fdatasync): its length included, its times not.
func datasync(f *os.File) error {
	return control(f, "fdatasync", syscall.Fdatasync)
}

// control runs op on f's descriptor, again after EINTR.
func control(f *os.File, name string, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if opErr = op(int(fd)); opErr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if opErr != nil {
		return &os.PathError{Op: name, Path: f.Name(), Err: opErr}
	}
	return nil
}
