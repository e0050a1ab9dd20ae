package swarm

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An adopter's record supersedes the sender's whatever their creation
// times and origin names: the sender's name sorting first (the case that
// lost sessions to the duplicate rule) changes nothing.
func TestHandoffGenerationSupersedesTieBreak(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sender := sessionRecord{Created: created, Node: "node1"}
	adopter := sessionRecord{Created: created, Node: "node2", Handoff: 1}
	if !supersedes(adopter, "node2@2", sender, "node1@1") || supersedes(sender, "node1@1", adopter, "node2@2") {
		t.Fatal("the sender's record of the earlier generation won")
	}
	forwarding := sender
	forwarding.MovedTo = "node2"
	if supersedes(forwarding, "node1@1", adopter, "node2@2") {
		t.Fatal("a forwarding record beat the adopter's")
	}
	if route(forwarding) != "node2" || route(adopter) != "node2" {
		t.Fatalf("calls route to %s and %s, want node2", route(forwarding), route(adopter))
	}
	// Two creations of one id in the same generation: the earlier wins.
	later := sessionRecord{Created: created.Add(time.Millisecond), Node: "node0"}
	if !supersedes(sender, "node1@1", later, "node0@1") {
		t.Fatal("a later concurrent creation won")
	}
}

// The handoff answer survives the trip through a gRPC status, and nothing
// else decodes as one.
func TestHandoffStatusRoundTrip(t *testing.T) {
	he := &handoffError{id: "s1", to: "node3", done: true}
	got := handoffFromStatus(he.status())
	if got == nil || *got != *he {
		t.Fatalf("decoded %+v, want %+v", got, he)
	}
	if !errors.Is(got, ErrHandingOff) {
		t.Fatal("a handoff answer does not match ErrHandingOff")
	}
	if handoffFromStatus(status.Error(codes.Unavailable, "session s1 is being handed off")) != nil {
		t.Fatal("a plain Unavailable decoded as a handoff")
	}
}
