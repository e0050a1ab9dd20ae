package mcpswarm_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/cluster"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
)

// A standby takes a session over from its copy only when the copy's owner
// asks, for the epoch and the final snapshot it names: a member asking in
// the owner's name, or the owner naming another epoch or another state,
// is refused, and the owner keeps serving the session with its standby
// still in sync.
func TestAStandbyTakesASessionOverOnlyAsItsOwnerHandsItOver(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	startCounter(t, alice, alice, "hv", 3)
	eventually(t, 5*time.Second, "hv's standby is node2", func() bool { return standbyOf(t, nodes[0], "hv") == "node2" })

	key, err := mcpswarm.LoadClusterKey(e.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	as := func(name string) forwardv1.ForwardServiceClient {
		creds, err := cluster.PeerCredentials(key, name)
		if err != nil {
			t.Fatal(err)
		}
		return forwardv1.NewForwardServiceClient(dial(t, nodes[1], grpc.WithPerRPCCredentials(creds)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	digest := sha256.Sum256([]byte("not the session's snapshot"))
	for _, tc := range []struct {
		what   string
		caller string
		epoch  uint64
		want   codes.Code
	}{
		{"a member asking in the owner's name", "node3", 0, codes.PermissionDenied},
		{"the owner naming a later epoch", "node1", 1, codes.FailedPrecondition},
		{"the owner naming another state", "node1", 0, codes.FailedPrecondition},
	} {
		_, err := as(tc.caller).AdoptSession(ctx, &forwardv1.AdoptSessionRequest{From: "node1", Standby: &forwardv1.StandbyHandover{
			Session: "hv", Epoch: tc.epoch, Digest: digest[:],
		}})
		if status.Code(err) != tc.want {
			t.Errorf("%s: AdoptSession answered %v, want %v", tc.what, err, tc.want)
		}
	}
	if slices.Contains(nodes[1].LocalSessions(), "hv") {
		t.Fatal("node2 runs hv after refusing every handover")
	}
	for i := range 2 {
		if res := alice.call("hv.inc.click", nil); res.IsError {
			t.Fatalf("click %d after the refused handovers: %s", i, textOf(res))
		}
	}
	if n, _ := countOf(t, alice, "hv"); n != 5 {
		t.Fatalf("hv counts %d, want 5", n)
	}
	if s := standbyOf(t, nodes[0], "hv"); s != "node2" {
		t.Fatalf("hv's in-sync standbys are %q after the refused handovers, want node2", s)
	}
}
