package journal

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU reports the process's CPU time (user and system, every
// goroutine and the kernel's work in its syscalls) per benchmark op, from
// getrusage around the timed loop: what a durable write costs the node
// beside its wait for the disk. It is called at the start of a benchmark
// and returns the function that reports at its end.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
