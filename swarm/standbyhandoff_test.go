package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// savedStore is a session.Store that keeps every snapshot the owner saved,
// encoded as the node's journal encodes it: what a standby was shipped.
type savedStore struct {
	*session.MemoryStore
	mu    sync.Mutex
	saved map[string][][]byte
}

func newSavedStore() *savedStore {
	return &savedStore{MemoryStore: session.NewMemoryStore(), saved: map[string][][]byte{}}
}

func (s *savedStore) Save(snap session.Snapshot) error {
	b, err := snap.AppendJSON(nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.saved[snap.Info.ID] = append(s.saved[snap.Info.ID], b)
	s.mu.Unlock()
	return s.MemoryStore.Save(snap)
}

// back returns the snapshot saved n saves before the last one.
func (s *savedStore) back(id string, n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.saved[id]
	return all[len(all)-1-n]
}

// copies is Standbys for one node: on an owner, the in-sync standbys it
// reports for every session; on a standby, the copies it holds, handed
// over as the node's replicas do (decoded, checked, epoch raised).
type copies struct {
	inSync []string

	mu         sync.Mutex
	held       map[string]heldCopy
	handedOver []string
}

type heldCopy struct {
	owner string
	epoch uint64
	snap  []byte
}

func (c *copies) hold(id, owner string, epoch uint64, snap []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[string]heldCopy{}
	}
	c.held[id] = heldCopy{owner, epoch, snap}
}

func (c *copies) InSync(string) []string { return c.inSync }

func (c *copies) CatchUp(context.Context, string) {}

func (c *copies) Behind(string) map[string]time.Time { return nil }

func (c *copies) Held(id string) (string, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[id]
	return h.owner, h.epoch, ok
}

func (c *copies) Promote(string) (session.Snapshot, func(), error) {
	return session.Snapshot{}, nil, errors.New("no failover in these tests")
}

func (c *copies) HandOver(id, owner string, epoch uint64, accept func(session.Snapshot) error) (session.Snapshot, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[id]
	if !ok || h.owner != owner || h.epoch != epoch {
		return session.Snapshot{}, nil, fmt.Errorf("no copy of %s from %s at epoch %d", id, owner, epoch)
	}
	var snap session.Snapshot
	if err := json.Unmarshal(h.snap, &snap); err != nil {
		return session.Snapshot{}, nil, err
	}
	if err := accept(snap); err != nil {
		return session.Snapshot{}, nil, err
	}
	delete(c.held, id)
	c.handedOver = append(c.handedOver, id)
	snap.Info.Handoff = epoch + 1
	return snap, func() { c.hold(id, owner, epoch, h.snap) }, nil
}

func (c *copies) Promoted(string) {}

func (c *copies) tookOver() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.handedOver)
}

// handoverPair starts an owner and its standby (which advertises caps)
// and starts counter session "hv" on the owner, clicked three times; the
// standby is told it holds what held picks from the owner's saves.
func handoverPair(t *testing.T, caps []string, held func(*savedStore) []byte) (owner, standby testNode, sb *copies) {
	t.Helper()
	store := newSavedStore()
	owner = startTestNodeWith(t, "owner", nodeOptions{store: store, standbys: &copies{inSync: []string{"standby"}}})
	sb = &copies{}
	standby = startTestNodeWith(t, "standby", nodeOptions{caps: caps, standbys: sb}, owner.cl.Self().GossipAddr)
	awaitPeers(t, owner, standby)
	startOn(t, owner, standby, "counter", "hv")
	for range 3 {
		if _, err := owner.sw.Call(context.Background(), alice, "hv", "hv.inc.click", nil); err != nil {
			t.Fatal(err)
		}
	}
	sb.hold("hv", "owner", 0, held(store))
	return owner, standby, sb
}

// countOn reads counter session id's count on n.
func countOn(t *testing.T, n testNode, id string) int {
	t.Helper()
	raw, err := n.mgr.Model(id)
	if err != nil {
		t.Fatalf("reading %s: %v", id, err)
	}
	var m struct{ Count int }
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m.Count
}

// A standby that holds the owner's final snapshot takes the session over
// from it: nothing is copied, the epoch moves on, and no click is lost.
func TestHandOffPromotesTheStandbyHoldingTheFinalSnapshot(t *testing.T) {
	owner, standby, sb := handoverPair(t, nil, func(s *savedStore) []byte { return s.back("hv", 0) })
	res, err := owner.sw.HandOff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Promoted != 1 || len(res.Moves) != 1 || !res.Moves[0].Promoted || res.Moves[0].To != "standby" {
		t.Fatalf("HandOff = %+v; want hv promoted on standby", res)
	}
	if got := sb.tookOver(); !slices.Equal(got, []string{"hv"}) {
		t.Fatalf("the standby took over %v from its copies, want [hv]", got)
	}
	info, ok := standby.mgr.Get("hv")
	if !ok || info.Handoff != 1 {
		t.Fatalf("the standby runs hv: %v, epoch %d; want epoch 1", ok, info.Handoff)
	}
	if n := countOn(t, standby, "hv"); n != 3 {
		t.Fatalf("hv counts %d after the handover, want 3", n)
	}
}

// A standby whose copy is not the final snapshot (one write behind)
// refuses, and the owner copies the session instead: the click the copy
// lacks is not lost.
func TestHandOffCopiesWhenTheStandbysCopyIsNotFinal(t *testing.T) {
	owner, standby, sb := handoverPair(t, nil, func(s *savedStore) []byte { return s.back("hv", 1) })
	res, err := owner.sw.HandOff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Promoted != 0 || len(res.Moves) != 1 || res.Moves[0].Promoted {
		t.Fatalf("HandOff = %+v; want hv copied", res)
	}
	if got := sb.tookOver(); len(got) != 0 {
		t.Fatalf("the standby took over %v from a copy one write behind", got)
	}
	if n := countOn(t, standby, "hv"); n != 3 {
		t.Fatalf("hv counts %d after the handover, want 3", n)
	}
}

// A standby of a release without the standby handover is never asked:
// the owner copies the session to it.
func TestHandOffCopiesToAStandbyWithoutTheCapability(t *testing.T) {
	caps := slices.DeleteFunc(cluster.DefaultCapabilities(), func(c string) bool { return c == cluster.CapStandbyHandoff })
	owner, standby, sb := handoverPair(t, caps, func(s *savedStore) []byte { return s.back("hv", 0) })
	res, err := owner.sw.HandOff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Promoted != 0 {
		t.Fatalf("HandOff = %+v; want hv copied", res)
	}
	if got := sb.tookOver(); len(got) != 0 {
		t.Fatalf("a standby without the capability was asked to take over %v", got)
	}
	if n := countOn(t, standby, "hv"); n != 3 {
		t.Fatalf("hv counts %d after the handover, want 3", n)
	}
}

// Only an answer that says the standby started nothing lets the owner
// copy the session to another node; after a lost answer the standby may
// run it already.
func TestOnlyAnOutrightRefusalSendsTheCopyElsewhere(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.FailedPrecondition, "the copy differs"), true},
		{status.Error(codes.PermissionDenied, "not the owner"), true},
		{status.Error(codes.InvalidArgument, "invalid id"), true},
		{status.Error(codes.AlreadyExists, "did not start"), true},
		{fmt.Errorf("standby n2: %w", errNoPromotion), true},
		{fmt.Errorf("standby n2 did not take the session over: %w", status.Error(codes.AlreadyExists, "taken")), true},
		{status.Error(codes.DeadlineExceeded, "deadline"), false},
		{status.Error(codes.Unavailable, "connection reset"), false},
		{status.Error(codes.Canceled, "canceled"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := refusedOutright(tc.err); got != tc.want {
			t.Errorf("refusedOutright(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
