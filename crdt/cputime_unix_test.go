//go:build unix

package crdt

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system, all threads) this process has
// used, which unlike wall-clock time does not grow when other processes
// compete for the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
