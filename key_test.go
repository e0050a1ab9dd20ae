package mcpswarm

import (
	"bytes"
	"strings"
	"testing"
)

func TestGeneratedKeyParsesBack(t *testing.T) {
	text, err := GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseClusterKey(text)
	if err != nil {
		t.Fatalf("parse generated key: %v", err)
	}
	if len(key) != ClusterKeySize {
		t.Fatalf("key length %d, want %d", len(key), ClusterKeySize)
	}
	other, _ := GenerateClusterKey()
	if other == text {
		t.Fatal("two generated keys are equal")
	}
}

func TestParseClusterKeyRejectsBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"not base64!!", "not base64"},
		{"c2hvcnQ=", "must be 32 bytes"},
		{"", "must be 32 bytes"},
	} {
		_, err := ParseClusterKey(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseClusterKey(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestDerivedKeysArePurposeBound(t *testing.T) {
	k := DevClusterKey()
	a, b := DeriveKey(k, "gossip"), DeriveKey(k, "peer")
	if bytes.Equal(a, b) {
		t.Fatal("different purposes derived the same key")
	}
	if !bytes.Equal(a, DeriveKey(k, "gossip")) {
		t.Fatal("derivation is not deterministic")
	}
	if len(a) != 32 {
		t.Fatalf("derived key length %d", len(a))
	}
}
