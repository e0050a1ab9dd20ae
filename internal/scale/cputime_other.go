//go:build !unix

package scale

import "time"

// cpuTime is unknown here: the at-rest CPU figures read 0.
func cpuTime() time.Duration { return 0 }
