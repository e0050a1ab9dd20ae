package mcpswarm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test here starts real nodes; none may leave a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
