package mcp

import (
	"bytes"
	"context"
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
	// Terminate through the manager: a nil-request manager only cleans up.
	if _, err := ids.Manager("", false).Terminate(id); err != nil || ids.Terminated(id) {
		t.Error("cleanup terminate revoked the id")
	}
	if _, err := ids.Manager("", true).Terminate(id); err != nil || !ids.Terminated(id) {
		t.Error("DELETE did not terminate the id")
	}
	if term, err := ids.Manager("", true).Validate(id); err != nil || !term {
		t.Errorf("validate terminated: %v %v", term, err)
	}
	if _, err := NewSessionIDs([]byte("short"), "n"); err == nil {
		t.Error("short key accepted")
	}
}

func TestRequestState(t *testing.T) {
	s, err := newStateSealer(testKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"b": 1, "a": "x"}
	tok := s.seal("alice", "s.w.click", args)
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
		if err := s.open(context.Background(), c.tok, c.principal, c.tool, c.args); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	old := s.seal("alice", "t", nil)
	s.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if err := s.open(context.Background(), old, "alice", "t", nil); !errors.Is(err, ErrStateExpired) {
		t.Errorf("expired: %v", err)
	}
}

func TestCheckMessage(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	okDeep := `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat(`[`, 60) + strings.Repeat(`]`, 60) + `}`
	batch := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	cases := []struct {
		body     string
		code     int
		contains string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, ""},
		{okDeep, 0, ""},
		{``, codeParseError, "empty"},
		{`{"jsonrpc":"2.0",`, codeParseError, "valid json"},
		{deep, codeInvalidRequest, "nesting"},
		{`"[]]]]"`, codeInvalidRequest, "object"},
		{batch(33), codeInvalidRequest, "exceeds the limit of 32"},
		{batch(2), codeInvalidRequest, "not supported"},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, codeInvalidRequest, "jsonrpc"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, codeInvalidRequest, "id must be"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, codeInvalidRequest, "id must be"},
		{`{"jsonrpc":"2.0","method":"x","params":"\"{{{{"}`, 0, ""},
	}
	for _, c := range cases {
		_, e := checkMessage([]byte(c.body), DefaultMaxBatch, DefaultMaxDepth)
		switch {
		case c.code == 0 && e != nil:
			t.Errorf("%.40q: unexpected %v", c.body, e)
		case c.code != 0 && (e == nil || e.Code != c.code || !strings.Contains(e.Message, c.contains)):
			t.Errorf("%.40q: got %v, want %d %q", c.body, e, c.code, c.contains)
		}
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
