package seal

import (
	"testing"
)

// BenchmarkTerminated is the check every request with a session id makes
// against the ids DELETEd on this node (non-empty, as on any node that has
// served a DELETE).
func BenchmarkTerminated(b *testing.B) {
	ids, err := NewSessionIDs(make([]byte, 32), "n1")
	if err != nil {
		b.Fatal(err)
	}
	for range 100 {
		ids.Terminate(ids.Mint("alice"))
	}
	live := ids.Mint("alice")
	b.ReportAllocs()
	for b.Loop() {
		if ids.Terminated(live) {
			b.Fatal("a live id reads as terminated")
		}
	}
}
