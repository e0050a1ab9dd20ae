//go:build !unix

package crdt

import "time"

// cpuTime is unavailable here; CPU-time metrics then read 0.
func cpuTime() time.Duration { return 0 }
