package seal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSessionIDs(t *testing.T) {
	ids, err := NewSessionIDs(testKey, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	id := ids.Mint("")
	c, err := ids.Open(id, "")
	if err != nil || c.Node != "node-a" || c.Principal != "" {
		t.Fatalf("open: %+v %v", c, err)
	}
	if ids.Mint("") == id {
		t.Error("two mints gave the same id")
	}
	// Another node of the cluster validates it; another cluster does not.
	other, _ := NewSessionIDs(testKey, "node-b")
	if c, err := other.Open(id, ""); err != nil || c.Node != "node-a" {
		t.Errorf("peer open: %+v %v", c, err)
	}
	foreign, _ := NewSessionIDs([]byte("another-key-another-key-another-"), "node-a")
	if _, err := foreign.Open(id, ""); !errors.Is(err, ErrSessionIDInvalid) {
		t.Errorf("foreign key: %v", err)
	}
	// Tampering with any character breaks it.
	for i := len(sidPrefix); i < len(id); i += 7 {
		b := []byte(id)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		if _, err := ids.Open(string(b), ""); err == nil {
			t.Fatalf("tampered id accepted at %d", i)
		}
	}
	for _, bad := range []string{"", "s1.", "s1.!!", "abc", id[:len(id)-4], strings.Repeat("s1.A", 2000)} {
		if _, err := ids.Open(bad, ""); !errors.Is(err, ErrSessionIDInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// Principal binding.
	bound := ids.Mint("alice")
	if _, err := ids.Open(bound, "alice"); err != nil {
		t.Errorf("alice: %v", err)
	}
	for _, p := range []string{"", "bob"} {
		if _, err := ids.Open(bound, p); !errors.Is(err, ErrSessionIDPrincipal) {
			t.Errorf("presented by %q: %v", p, err)
		}
	}
	if _, err := ids.Open(id, "alice"); !errors.Is(err, ErrSessionIDPrincipal) {
		t.Errorf("unbound id presented by alice: %v", err)
	}
	if ids.Terminated(id) {
		t.Error("an id was terminated before its DELETE")
	}
	ids.Terminate(id)
	if !ids.Terminated(id) {
		t.Error("DELETE did not terminate the id")
	}
	if _, err := NewSessionIDs([]byte("short"), "n"); err == nil {
		t.Error("short key accepted")
	}
}

func TestRequestState(t *testing.T) {
	s, err := NewStates(testKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"b": 1, "a": "x"}
	tok := s.Seal("alice", "s.w.click", args)
	same := map[string]any{"a": "x", "b": 1}
	// Tamper with the tag's last characters so they always differ: "AA"
	// alone left a token that already ended in "AA" intact (1 run in 256).
	tampered := tok[:len(tok)-2] + "AA"
	if tampered == tok {
		tampered = tok[:len(tok)-2] + "BB"
	}
	cases := []struct {
		name, tok, principal, tool string
		args                       map[string]any
		want                       error
	}{
		{"other principal", tok, "bob", "s.w.click", args, ErrStateMismatch},
		{"other tool", tok, "alice", "s.w.type_into", args, ErrStateMismatch},
		{"other args", tok, "alice", "s.w.click", map[string]any{"a": "y", "b": 1}, ErrStateMismatch},
		{"tampered", tampered, "alice", "s.w.click", args, ErrStateInvalid},
		{"garbage", "rs1.zzz", "alice", "s.w.click", args, ErrStateInvalid},
		{"no prefix", "hello", "alice", "s.w.click", args, ErrStateInvalid},
		{"ok", tok, "alice", "s.w.click", same, nil},
		{"replayed", tok, "alice", "s.w.click", args, ErrStateReplayed},
	}
	for _, c := range cases {
		if err := s.Open(context.Background(), c.tok, c.principal, c.tool, c.args); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	old := s.Seal("alice", "t", nil)
	s.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if err := s.Open(context.Background(), old, "alice", "t", nil); !errors.Is(err, ErrStateExpired) {
		t.Errorf("expired: %v", err)
	}
}

func TestSessionIDsExpireAfterTheMaximumAge(t *testing.T) {
	ids, err := NewSessionIDs(bytes.Repeat([]byte{7}, 32), "node1")
	if err != nil {
		t.Fatal(err)
	}
	ids.SetMaxAge(time.Hour)
	id := ids.Mint("alice")
	if _, err := ids.Open(id, "alice"); err != nil {
		t.Fatalf("a fresh id: %v", err)
	}
	ids.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := ids.Open(id, "alice"); !errors.Is(err, ErrSessionIDExpired) {
		t.Fatalf("an id past its maximum age: %v, want ErrSessionIDExpired", err)
	}
}

// A serial id carries its sealer's epoch and sequence number, enciphered:
// any node with the cluster's key reads them (SerialReader) without
// opening the id, in minting order; another key reads nothing. While the
// cluster says a node does not read serial ids, the sealer mints the
// previous form, which every node still opens.
func TestSerialIDs(t *testing.T) {
	ids, err := NewSessionIDs(testKey, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	read, err := SerialReader(testKey)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := SerialReader([]byte("another-key-another-key-another-"))
	first, second := ids.Mint("alice"), ids.Mint("alice")
	if !strings.HasPrefix(first, SerialPrefix) {
		t.Fatalf("minted %q; want a serial id", first)
	}
	a, okA := read(first)
	b, okB := read(second)
	if !okA || !okB || !bytes.Equal(a[:8], b[:8]) || binary.BigEndian.Uint32(b[8:]) != binary.BigEndian.Uint32(a[8:])+1 {
		t.Fatalf("serials %x (%v), %x (%v); want one epoch, consecutive", a, okA, b, okB)
	}
	if _, ok := foreign(first); ok {
		t.Fatal("a serial read under another cluster's key")
	}
	if strings.Contains(first, base64.RawURLEncoding.EncodeToString(a[:9])) {
		t.Fatal("the serial shows in the id")
	}
	other, _ := NewSessionIDs(testKey, "node-b")
	if c, err := other.Open(first, "alice"); err != nil || c.Node != "node-a" || c.Principal != "alice" {
		t.Fatalf("peer open of a serial id: %+v %v", c, err)
	}
	if c, _ := other.Serial(first); c != a {
		t.Fatal("the peer reads another serial")
	}
	// A new sealer (a restarted node) numbers from a new epoch.
	again, _ := NewSessionIDs(testKey, "node-a")
	if c, _ := read(again.Mint("")); bytes.Equal(c[:8], a[:8]) {
		t.Fatal("a new sealer reuses the epoch")
	}

	ids.SetCluster(revocations{serial: false})
	prev := ids.Mint("alice")
	if !strings.HasPrefix(prev, sidPrefix) {
		t.Fatalf("minted %q while a node does not read serial ids", prev)
	}
	if _, ok := read(prev); ok {
		t.Fatal("a version-1 id read as serial")
	}
	if _, err := other.Open(prev, "alice"); err != nil {
		t.Fatalf("peer open of a version-1 id: %v", err)
	}
	for _, bad := range []string{SerialPrefix, SerialPrefix + "!!", SerialPrefix + strings.Repeat("A", 24), first[:len(first)-4]} {
		if _, err := ids.Open(bad, "alice"); !errors.Is(err, ErrSessionIDInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
