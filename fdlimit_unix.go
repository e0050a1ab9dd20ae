//go:build unix

package mcpswarm

import "syscall"

// openFileLimit is the soft RLIMIT_NOFILE (Go raises it to the hard limit
// at start on Linux); 0 when it cannot be read.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
