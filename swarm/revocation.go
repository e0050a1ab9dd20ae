package swarm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/mcpswarm/mcpswarm/cluster"
)

// revKey names a revocation: the first 12 bytes of the SHA-256 of the
// connection id. A revocation is kept on every node for the id's maximum
// age (7 days by default), one per ended connection, so its size is what
// a node's memory grows by under churn: the sealed id is about 105 bytes,
// its digest 12 (issue #13's soak: ≈ 1.4 KiB per ended connection per
// node with the id as key and a JSON value; see docs/ARCHITECTURE.md).
// With 12 bytes, two of a billion ids share a digest with probability
// below 2⁻³⁶, and the only harm would be a live id refused (its client
// initializes again): nobody can aim a collision at an id they never saw.
type revKey [12]byte

// revocationOf returns the key of id's revocation.
func revocationOf(id string) revKey {
	sum := sha256.Sum256([]byte(id))
	return revKey(sum[:12])
}

// revPrefix starts a revocation's key in the "conns" registry. Connection
// ids are sealed ("s1." + base64url), so no live record's key starts with
// it.
const revPrefix = "r:"

// regKey is the revocation's key in the "conns" registry.
func (k revKey) regKey() string {
	return revPrefix + base64.RawURLEncoding.EncodeToString(k[:])
}

// parseRevKey reads a registry key written by regKey.
func parseRevKey(key string) (revKey, bool) {
	rest, ok := strings.CutPrefix(key, revPrefix)
	var k revKey
	if !ok || base64.RawURLEncoding.DecodedLen(len(rest)) != len(k) {
		return k, false
	}
	n, err := base64.RawURLEncoding.Decode(k[:], []byte(rest))
	return k, err == nil && n == len(k)
}

// A revocation's value is when it was made: 8 bytes, big-endian unix
// nanoseconds. Nothing else: refusing an id needs only its digest, and
// expiring the revocation only its age.
func encodeRevocation(at int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(at)) }

func decodeRevocation(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// peerLacks reports whether a live peer (alive, suspect or draining) does
// not advertise capability name: a node of a previous version, during a
// rolling upgrade.
func (s *Swarm) peerLacks(name string) bool {
	for _, m := range s.cl.Members() {
		if !m.Self && m.State <= cluster.StateDraining && !m.Capabilities.Has(name) {
			return true
		}
	}
	return false
}
