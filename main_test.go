package mcpswarm_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpswarm/mcpswarm/internal/poll"
)

// Every test here starts real nodes; none may leave a goroutine behind.
//
// goleak's own wait (about a second) is shorter than what memberlist may
// legitimately need after Shutdown: a probe of a peer a test killed waits
// out its ack timer and its TCP fallback ping, and on a loaded machine those
// timers fire late. So the check runs until the goroutines are gone or 10 s
// have passed; a real leak outlives any wait and still fails the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// Goroutines ending raise no event to wait on: poll.
		if err := poll.Wait(10*time.Second, func() error { return goleak.Find() }); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests by 10 s: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
