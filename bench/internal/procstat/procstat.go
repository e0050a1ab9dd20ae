// Package procstat reads what a process costs from /proc: its CPU time
// (utime+stime), its resident set and how often its threads sleep.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// UserHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on
// every Linux ABI.
const UserHZ = 100

// CPUTicks is utime+stime of pid, in USER_HZ ticks.
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time: %w", err)
	}
	// The command name may hold spaces; fields restart after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("reading CPU time: short /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading CPU time: odd /proc/%d/stat", pid)
	}
	return u + st, nil
}

// RSSKB is VmRSS of pid, in KiB.
func RSSKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("reading RSS: no VmRSS in /proc/%d/status", pid)
}

// Sleeps is how many times pid's threads went to sleep waiting for
// something (voluntary_ctxt_switches, summed over /proc/PID/task): each is
// a later wake-up, so its rate over a rest is how often the process wakes.
// Threads that exited are not counted; a process at rest keeps its
// threads.
func Sleeps(pid int) (int64, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("listing threads: %w", err)
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // the thread exited meanwhile
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("reading /proc/%d/task/%s/status: %w", pid, t.Name(), err)
				}
				n += v
			}
		}
	}
	return n, nil
}
