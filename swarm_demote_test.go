package mcpswarm_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	mcpswarm "github.com/mcpswarm/mcpswarm"
)

// An owner whose write a standby refused (the standby holds a later epoch:
// another node took the session over) stops its copy. Until the new
// owner's record reaches it, a call through it answers a retryable "owner
// unavailable … retry", not "not running … swarm_start", which would send
// the client off to start a new session.
func TestAnOwnerDemotedByItsStandbyAnswersRetry(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	startCounter(t, alice, alice, "ct", 2)
	mcpswarm.Demote(nodes[0], "ct")
	eventually(t, 10*time.Second, "node1 stops its copy of ct", func() bool {
		return !slices.Contains(nodes[0].LocalSessions(), "ct")
	})
	res := alice.call("ct.inc.click", nil)
	if !res.IsError || strings.Contains(textOf(res), "not running") || !strings.Contains(textOf(res), "retry") {
		t.Fatalf("a click through the demoted owner answered %q; want a retryable refusal", textOf(res))
	}
}
