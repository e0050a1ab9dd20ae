//go:build !linux

package journal

import (
	"errors"
	"os"
)

// preallocate is unsupported here: the journal appends and fsyncs.
func preallocate(*os.File, int64, int64) error { return errors.ErrUnsupported }

// datasync is f.Sync where fdatasync is not available.
func datasync(f *os.File) error { return f.Sync() }
