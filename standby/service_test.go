package standby

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
)

type callerKey struct{}

func as(name string) context.Context {
	return context.WithValue(context.Background(), callerKey{}, name)
}

func newService(t *testing.T) (*Service, *Holder) {
	t.Helper()
	h, err := OpenHolder(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return NewService(h, func(ctx context.Context) string { s, _ := ctx.Value(callerKey{}).(string); return s }), h
}

func hold(epoch, seq uint64) *standbyv1.HoldRequest {
	return &standbyv1.HoldRequest{Session: "ct", Owner: "node1", Epoch: epoch, Seq: seq, Snapshot: []byte(`{"n":1}`)}
}

func TestHoldTakesASnapshotOnlyFromItsOwner(t *testing.T) {
	s, _ := newService(t)
	if _, err := s.Hold(as("node2"), hold(0, 1)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a snapshot in another node's name answered %v, want PermissionDenied", err)
	}
	if _, err := s.Hold(context.Background(), hold(0, 1)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an unauthenticated snapshot answered %v, want PermissionDenied", err)
	}
	bad := hold(0, 1)
	bad.Session = "../etc"
	if _, err := s.Hold(as("node1"), bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an invalid session id answered %v, want InvalidArgument", err)
	}
	empty := hold(0, 1)
	empty.Snapshot = nil
	if _, err := s.Hold(as("node1"), empty); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty snapshot answered %v, want InvalidArgument", err)
	}
	if _, err := s.Hold(as("node1"), hold(0, 1)); err != nil {
		t.Fatalf("the owner's snapshot: %v", err)
	}
	if _, err := s.Release(as("node2"), &standbyv1.ReleaseRequest{Session: "ct"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a release by another node answered %v, want PermissionDenied", err)
	}
}

func TestHoldRefusesAnOlderEpochAndKeepsTheNewestSeq(t *testing.T) {
	s, h := newService(t)
	for _, r := range []*standbyv1.HoldRequest{hold(2, 5), hold(2, 3)} {
		if _, err := s.Hold(as("node1"), r); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := h.Get("ct"); c.Epoch != 2 || c.Seq != 5 {
		t.Fatalf("held epoch %d seq %d after a late duplicate, want 2/5", c.Epoch, c.Seq)
	}
	if _, err := s.Hold(as("node1"), hold(1, 9)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("an older epoch answered %v, want FailedPrecondition", err)
	}
}

func TestAPromotedSessionFencesItsOldEpoch(t *testing.T) {
	s, h := newService(t)
	if _, err := s.Hold(as("node1"), hold(3, 1)); err != nil {
		t.Fatal(err)
	}
	c, err := h.Promote("ct")
	if err != nil || c.Epoch != 3 {
		t.Fatalf("promote: %+v, %v", c, err)
	}
	// The old owner wakes up and ships again: no copy is held any more,
	// but the fence refuses its epoch.
	if _, err := s.Hold(as("node1"), hold(3, 2)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("the old owner's snapshot after the promotion answered %v, want FailedPrecondition", err)
	}
	if _, err := s.Hold(as("node1"), hold(4, 1)); err != nil {
		t.Fatalf("a snapshot of the new epoch: %v", err)
	}
}

func TestCopiesSurviveARestartOfTheHolder(t *testing.T) {
	dir := t.TempDir()
	h, err := OpenHolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Hold(Copy{Session: "ct", Owner: "node1", Epoch: 1, Seq: 7, Snapshot: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h, err = OpenHolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if c, ok := h.Get("ct"); !ok || c.Owner != "node1" || c.Epoch != 1 || c.Seq != 7 {
		t.Fatalf("after a restart the holder has %+v (%v), want node1's epoch 1 seq 7", c, ok)
	}
}
