package swarm

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// A session this node stopped because another node took it over (a
// standby refused its write under a later epoch) is answered, until the
// new owner's record arrives, with a retryable "taken over", not with
// "not running", which would send its client off to start a new session;
// other principals still learn nothing of it.
func TestASupersededSessionAnswersRetryUntilItsNewOwnerIsKnown(t *testing.T) {
	_, _, nodes := startContract(t, 1)
	sw := nodes[0].sw
	alice := authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}}
	bob := authz.Context{Principal: authz.Principal{Subject: "bob", Authenticated: true}}
	if _, err := sw.resolve(alice, "ct"); !errors.Is(err, session.ErrNotRunning) {
		t.Fatalf("an unknown session resolves to %v, want not running", err)
	}
	sw.Superseded("ct", "alice")
	_, err := sw.resolve(alice, "ct")
	if err == nil || errors.Is(err, session.ErrNotRunning) || !strings.Contains(err.Error(), "nothing ran: retry") {
		t.Fatalf("a superseded session resolves to %v, want a retryable taken-over answer", err)
	}
	if _, err := sw.resolve(bob, "ct"); !errors.Is(err, session.ErrNotRunning) {
		t.Fatalf("another principal's superseded session resolves to %v, want not running", err)
	}
}
