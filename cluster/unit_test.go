package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/mcpswarm/mcpswarm/crdt"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []nodeMeta{
		{GRPCAddr: "10.1.2.3:7000", Epoch: 1, Version: "v1.2.3"},
		{GRPCAddr: "[::1]:7000", Epoch: 1<<63 + 5, Draining: true},
		{GRPCAddr: "x", Epoch: 9, Leaving: true, Draining: true, Version: strings.Repeat("v", 400)},
	}
	for i, m := range tests {
		b, err := m.encode()
		if err != nil {
			t.Fatalf("Test %d: encode: %v", i, err)
		}
		got, err := decodeMeta(b)
		if err != nil || got != m {
			t.Errorf("Test %d: decoded %+v, %v; want %+v", i, got, err, m)
		}
	}
	if _, err := (nodeMeta{GRPCAddr: "a", Epoch: 1, Version: strings.Repeat("v", 600)}).encode(); err == nil {
		t.Error("metadata above 512 bytes encoded")
	}
	good, _ := tests[0].encode()
	for i, bad := range [][]byte{nil, {2, 0}, {1, 4, 1, 0, 0}, {1, 0, 0, 0, 0}, good[:len(good)-1], append(slices.Clone(good), 0)} {
		if _, err := decodeMeta(bad); err == nil {
			t.Errorf("Test %d: decoded malformed metadata %x", i, bad)
		}
	}
}

func testStorage(t *testing.T, open func() Storage) {
	s := open()
	if e, _ := s.Epochs(); len(e) != 0 {
		t.Fatalf("fresh store has epochs %v", e)
	}
	now := time.Now()
	e1, err := drawEpoch(s, now)
	if err != nil {
		t.Fatal(err)
	}
	// A clock that went backwards still gives a larger epoch.
	e2, err := drawEpoch(s, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if e2 <= e1 {
		t.Errorf("second epoch %d not above first %d", e2, e1)
	}
	for i := range maxEpochHistory + 3 {
		if err := s.AddEpoch(e2 + uint64(i) + 1); err != nil {
			t.Fatal(err)
		}
	}
	if hist, _ := s.Epochs(); len(hist) != maxEpochHistory || !slices.IsSorted(hist) {
		t.Errorf("history of %d epochs (sorted %t), want %d", len(hist), slices.IsSorted(hist), maxEpochHistory)
	}
	applied := 0
	ok := func() error { applied++; return nil }
	if err := s.Write("tools", "b", []byte("2"), ok); err != nil {
		t.Fatal(err)
	}
	if err := s.Write("tools", "a", []byte("1"), ok); err != nil {
		t.Fatal(err)
	}
	if err := s.Write("tools", "c", []byte("3"), ok); err != nil {
		t.Fatal(err)
	}
	if err := s.Write("tools", "c", nil, ok); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Write("tools", "d", []byte("4"), func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("failed apply: %v", err)
	}
	if err := s.Write("sessions", "s", []byte("x"), ok); err != nil {
		t.Fatal(err)
	}
	if applied != 5 {
		t.Errorf("apply ran %d times, want 5", applied)
	}
	load := func(s Storage, reg string) string {
		var b strings.Builder
		if err := s.Load(reg, func(k string, v []byte) error { fmt.Fprintf(&b, "%s=%s ", k, v); return nil }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := load(s, "tools"); got != "a=1 b=2 " {
		t.Errorf("tools = %q", got)
	}
	if got := load(s, "none"); got != "" {
		t.Errorf("unknown registry = %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	if got := load(s, "tools") + load(s, "sessions"); got != "a=1 b=2 s=x " {
		t.Errorf("after reopen: %q", got)
	}
	e3, err := drawEpoch(s, now)
	if err != nil {
		t.Fatal(err)
	}
	if e3 <= e2+maxEpochHistory+3 {
		t.Errorf("epoch after reopen %d not above history", e3)
	}
}

func TestBoltStorage(t *testing.T) {
	dir := t.TempDir()
	testStorage(t, func() Storage {
		s, err := OpenBolt(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemoryStorage(t *testing.T) {
	m := NewMemoryStorage()
	testStorage(t, func() Storage { m.Reopen(); return m })
}

func TestNewNamesDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := LocalConfig()
	cfg.Name, cfg.GRPCAddr, cfg.Key, cfg.DataDir = "n0", "127.0.0.1:1", testKey, dir
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	// The file is locked by the first instance.
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("second open: %v, want an error naming %s", err, dir)
	}
}

func TestConfigValidation(t *testing.T) {
	cfg := LocalConfig()
	_, err := New(cfg)
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, want := range []string{"name", "cluster key must be 32 bytes", "grpc address must be set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	cfg.Name, cfg.GRPCAddr, cfg.Key = "n0", "127.0.0.1:1", testKey
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	for _, bad := range []string{"", "Tools", "a-b", strings.Repeat("a", 33)} {
		if _, err := c.Registry(bad); err == nil {
			t.Errorf("registry name %q accepted", bad)
		}
	}
	r, err := c.Registry("tools")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Put("k", nil); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Put before Start: %v", err)
	}
}

func TestCredential(t *testing.T) {
	k, _ := deriveKeys(testKey)
	if string(k.gossip) == string(k.peer) {
		t.Fatal("gossip and peer keys are equal")
	}
	ctxWith := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	tests := []struct {
		ctx  context.Context
		want error
	}{
		{ctxWith(MDPeerName, "n1", MDPeerCredential, credential(k.peer, "n1")), nil},
		{context.Background(), errNoCredential},
		{ctxWith(MDPeerName, "n1"), errNoCredential},
		{ctxWith(MDPeerName, "n1", MDPeerCredential, credential(k.peer, "n2")), errBadCredential},
		{ctxWith(MDPeerName, "n 1", MDPeerCredential, credential(k.peer, "n 1")), errBadCredential},
		{ctxWith(MDPeerName, "n1", MDPeerCredential, credential(k.gossip, "n1")), errBadCredential},
	}
	// Twice through one verifier: the second pass meets n1's remembered
	// credential, which must refuse the same forgeries.
	v := newPeerVerifier(k.peer)
	for pass := range 2 {
		for i, tc := range tests {
			name, err := authenticate(tc.ctx, v)
			if !errors.Is(err, tc.want) || (err == nil && name != "n1") {
				t.Errorf("pass %d, test %d: got %q, %v; want %v", pass, i, name, err, tc.want)
			}
		}
	}
}

// TestPeerVerifierRemembersOnlyVerifiedNames: a caller without the key
// adds nothing to what the verifier remembers, the memory is bounded, and
// names past the bound still verify (computed each time).
func TestPeerVerifierRemembersOnlyVerifiedNames(t *testing.T) {
	k, err := deriveKeys(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	v := newPeerVerifier(k.peer)
	for i := range 2 * maxVerifiedNames {
		name := fmt.Sprintf("forger%d", i)
		if _, err := v.Verify(metadata.Pairs(MDPeerName, name, MDPeerCredential, credential(k.gossip, name))); !errors.Is(err, errBadCredential) {
			t.Fatalf("a forged credential for %s: %v", name, err)
		}
	}
	if len(v.known) != 0 {
		t.Fatalf("forged credentials left %d names remembered", len(v.known))
	}
	for i := range maxVerifiedNames + 10 {
		name := fmt.Sprintf("n%d", i)
		for range 2 {
			if got, err := v.Verify(metadata.Pairs(MDPeerName, name, MDPeerCredential, credential(k.peer, name))); err != nil || got != name {
				t.Fatalf("member %s: %q %v", name, got, err)
			}
		}
	}
	if len(v.known) != maxVerifiedNames {
		t.Fatalf("%d names remembered, want the bound %d", len(v.known), maxVerifiedNames)
	}
}

func TestAccept(t *testing.T) {
	n := startNode(t, memnet.New(), "n0", "")
	self := n.c.Origin()
	sender := crdt.Origin{Name: "p", Epoch: 5}
	tests := []struct {
		o    crdt.Origin
		ok   bool
		why  string
		note string
	}{
		{self, false, "own origin", "own data"},
		{sender, true, "", "the owner pushing before the view knows it"},
		{crdt.Origin{Name: "ghost", Epoch: 3}, false, "unknown origin", "a relay of an unknown origin"},
	}
	for i, tc := range tests {
		ok, why := n.c.accept(tc.o, sender)
		if ok != tc.ok || why != tc.why {
			t.Errorf("Test %d (%s): accept = %t %q, want %t %q", i, tc.note, ok, why, tc.ok, tc.why)
		}
	}
}

func TestSerialQueueKeepsOrderAndAllowsReentry(t *testing.T) {
	var q serialQueue[int]
	var got []int
	var deliver func(int)
	deliver = func(i int) {
		got = append(got, i)
		if i == 1 {
			q.add(3) // a callback that writes
			q.drain(deliver)
		}
	}
	q.add(1)
	q.add(2)
	q.drain(deliver)
	if !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("delivered %v", got)
	}
}
