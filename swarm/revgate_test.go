package swarm

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The gate lets a revision through exactly when the session's last record
// write is a gap old (or it has none), holds it otherwise, and a release
// writes exactly the held sessions: no revision is lost, none written twice.
func TestRevGateWritesOncePerGapAndLosesNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const gap = 25 * time.Millisecond
		var g revGate
		now := time.Unix(0, 0)
		last := map[string]time.Time{} // the session's last record write
		dirty := map[string]bool{}     // a revision not yet written
		for range rapid.IntRange(1, 300).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 30).Draw(rt, "ms")) * time.Millisecond)
			if rapid.IntRange(0, 4).Draw(rt, "op") == 0 {
				rel, _ := g.release(now, gap)
				for _, id := range rel {
					if !dirty[id] {
						rt.Fatalf("released %s with nothing to write", id)
					}
					dirty[id], last[id] = false, now
				}
				for id, d := range dirty {
					if d {
						rt.Fatalf("%s still unwritten after a release", id)
					}
				}
				continue
			}
			id := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "id")
			at, wrote := last[id]
			recent := wrote && now.Sub(at) < gap
			if g.admit(id, now, gap) {
				if recent {
					rt.Fatalf("%s admitted %v after its last write", id, now.Sub(at))
				}
				last[id], dirty[id] = now, false
			} else {
				if !recent {
					rt.Fatalf("%s held though its last write is %v old", id, now.Sub(at))
				}
				dirty[id] = true
			}
		}
	})
}
