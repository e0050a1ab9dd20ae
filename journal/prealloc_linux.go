//go:build linux

package journal

import (
	"os"
	"syscall"
)

// preallocate gives f disk blocks from off to off+n and extends its length
// to there (fallocate mode 0). A write inside that range then changes no
// metadata a data sync must flush (see the package documentation for
// what that saved).
func preallocate(f *os.File, off, n int64) error {
	return control(f, "fallocate", func(fd int) error { return syscall.Fallocate(fd, 0, off, n) })
}

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
