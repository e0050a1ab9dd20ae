package swarm

import (
	"errors"
	"testing"
)

// The failover rule, case by case, from one node's view: node2 holds the
// copy of session ct that node1, the dead owner, last named it for.
func TestPromotionVerdict(t *testing.T) {
	base := func() promotion {
		return promotion{
			self:      "node2",
			rec:       sessionRecord{Node: "node1", Handoff: 3, Standbys: []string{"node2", "node3"}},
			held:      true,
			heldOwner: "node1",
			heldEpoch: 3,
			alive:     func(n string) bool { return n != "node1" },
			inSync:    func() error { return nil },
			majority:  func() bool { return true },
		}
	}
	cases := []struct {
		name string
		edit func(*promotion)
		want promoteVerdict
	}{
		{"the first standby alive, in sync, with the record's copy promotes", func(*promotion) {}, promoteNow},
		{"an earlier standby alive acts instead", func(p *promotion) { p.rec.Standbys = []string{"node3", "node2"} }, promoteNo},
		{"an earlier standby dead leaves it to this one", func(p *promotion) {
			p.rec.Standbys = []string{"node3", "node2"}
			p.alive = func(n string) bool { return n == "node2" }
		}, promoteNow},
		{"a copy of another epoch does not promote", func(p *promotion) { p.heldEpoch = 2 }, promoteNo},
		{"a copy of another owner does not promote", func(p *promotion) { p.heldOwner = "node4" }, promoteNo},
		{"no copy, no promotion", func(p *promotion) { p.held = false }, promoteNo},
		{"a session handed off is the adopter's", func(p *promotion) { p.senderLeft = true }, promoteNo},
		{"a draining node takes nothing over", func(p *promotion) { p.draining = true }, promoteNo},
		{"a session already running here is not promoted again", func(p *promotion) { p.running = true }, promoteNo},
		{"behind the majority, it waits", func(p *promotion) { p.inSync = func() error { return errors.New("catching up") } }, promoteLater},
		{"outside a strict majority, it waits", func(p *promotion) { p.majority = func() bool { return false } }, promoteLater},
		// It deleted the owner's records while cut off, and a peer holds
		// later ones: what it kept may name it wrongly.
		{"a record known out of date never promotes", func(p *promotion) { p.outdated = true }, promoteNo},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base()
			c.edit(&in)
			if got := promotionVerdict(in); got != c.want {
				t.Fatalf("promotionVerdict = %d, want %d", got, c.want)
			}
		})
	}
}
