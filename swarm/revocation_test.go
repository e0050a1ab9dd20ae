package swarm

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mcpswarm/mcpswarm/cluster"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

// A DELETE is kept as the id's digest and time under a revocation key,
// and the live record under the id goes. While a live peer runs a version
// that reads only the previous form (it does not advertise
// cluster.CapRevocationKeys), the revoker also writes that form — a
// revoked record under the id — so the old peer refuses the id as soon as
// the DELETE is answered; with no such peer, it writes only the key.
func TestRevocationIsWrittenInTheFormEveryLivePeerReads(t *testing.T) {
	for _, tc := range []struct {
		name       string
		oldPeer    bool
		wantLegacy bool
	}{
		{"every peer reads revocation keys", false, false},
		{"a previous-version peer", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, nodes := startContractWith(t, 2, func(i int, cfg *cluster.Config) {
				if i == 1 && tc.oldPeer {
					cfg.Capabilities = slices.DeleteFunc(cluster.DefaultCapabilities(), func(c string) bool { return c == cluster.CapRevocationKeys })
				}
			})
			a, b := nodes[0], nodes[1]
			id := "s1.connection-ended-on-n1"
			a.sw.Conns().Put(mcpfront.ConnInfo{ID: id, Node: a.name, Principal: "alice", ProtocolVersion: "2025-11-25"})
			if _, ok := b.sw.Conns().Get(id); !ok {
				t.Fatal("n2 does not know the connection once initialize was answered")
			}
			a.sw.Conns().Delete(id)

			// What n2 holds of n1's partition once the DELETE was answered.
			origin := a.cl.Origin()
			k := revocationOf(id)
			rev, ok := b.sw.conns.reg.Get(origin, k.regKey())
			if at, valid := decodeRevocation(rev.Value); !ok || !valid || at == 0 {
				t.Fatalf("n2 holds no revocation key from n1 (%v, %q)", ok, rev.Value)
			}
			old, ok := b.sw.conns.reg.Get(origin, id)
			var r connRecord
			legacy := ok && json.Unmarshal(old.Value, &r) == nil && r.Revoked && r.Info.ID == ""
			if legacy != tc.wantLegacy || (ok && !legacy) {
				t.Fatalf("n2 holds under the id %q (present %v); want a revoked record: %v", old.Value, ok, tc.wantLegacy)
			}
			if !b.sw.Conns().Revoked(id) || !a.sw.Conns().Revoked(id) {
				t.Fatal("a node does not refuse the revoked id")
			}
		})
	}
}
