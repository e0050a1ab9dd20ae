//go:build unix

package session

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user+system) the process has used. The
// benchmarks report it per op because wall time on a shared machine mostly
// measures the neighbours.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
