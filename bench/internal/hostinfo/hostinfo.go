// Package hostinfo says where benchmark and soak figures come from: the
// machine's CPUs, Go version, CPU model and load.
package hostinfo

import (
	"os"
	"runtime"
	"strings"
)

// Machine describes the host a run measured on.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GoVersion  string `json:"go"`
	CPUModel   string `json:"cpu_model"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

// Now describes this host, with the load average as it is now in
// LoadBefore; set LoadAfter with LoadAvg when the run ends.
func Now() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: LoadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}

// LoadAvg is the 1-minute load average, or "?" off Linux.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
