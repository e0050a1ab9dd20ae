package cluster

import (
	"slices"
	"strconv"
	"strings"

	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// PeerProtocol is the version of the peer protocol this code speaks. A
// member that advertises none speaks protocol 1: the forms every version
// reads.
const PeerProtocol = 2

// Capabilities a node advertises in its member metadata. A sender uses a
// newer form of a message only with peers that advertise it.
const (
	// CapStreamRefs: the node reads Replicate streams whose deltas name
	// origins and registries by refs (OriginDecl, RegistryDecl). Without
	// it a peer gets every delta with its names spelled out.
	CapStreamRefs = "stream-refs"
	// CapHandoffGen: the node adopts a handed-off session with its handoff
	// generation (session.Info.Handoff), so its record supersedes the
	// sender's by an ordered transfer.
	CapHandoffGen = "handoff-gen"
	// CapRevocationKeys: the node reads a connection's revocation under
	// its own key in the "conns" registry ("r:" and the id's digest).
	// Without it a peer reads only the revoked record under the id.
	CapRevocationKeys = "revocation-keys"
	// CapSerialIDs: the node accepts serial session ids ("s2.", see
	// seal.SessionIDs.Serial) and reads their revocations by block ("rb:"
	// keys in the "conns" registry). A node mints them only while every
	// live peer advertises it.
	CapSerialIDs = "serial-ids"
	// CapCallStream: the node serves mcpswarm.forward.v1 ForwardService.Calls,
	// so a peer forwards its tool calls to it over one long-lived stream
	// rather than a stream per call.
	CapCallStream = "call-stream"
	// CapStandby: the node serves mcpswarm.standby.v1, so an owner may
	// place a session's standby on it.
	CapStandby = "standby"
	// CapStandbyHandoff: the node takes a session over from its standby
	// copy when the draining owner asks (ForwardService.AdoptSession with
	// a StandbyHandover), so a drain promotes a standby instead of copying
	// the session. Without it the owner copies the session to its adopter.
	CapStandbyHandoff = "standby-handoff"
	// CapSpentHolders: the node keeps spent request states at their
	// holders (swarm.Nonces: the nonce's first two live members by
	// rendezvous score) and holds one when asked (SpendState with hold).
	// While a live peer lacks it, every node spends states by the previous
	// rule: at the arbiter, copied to every node.
	CapSpentHolders = "spent-holders"
	// CapBeatPair: the node answers a peer's heartbeat with its own
	// position and renews its lease on that peer from the peer's answers
	// to its heartbeats (ReplicateResponse.position), so one heartbeat
	// exchange per pair of nodes renews the leases both ways: a node whose
	// name is the larger of a pair heartbeats its stream to the other only
	// while the other's heartbeats stop coming (beatpair.go). Without it a
	// peer gets every heartbeat, and its own keep coming.
	CapBeatPair = "beat-pair"
	// zonePrefix starts the capability name that carries a node's zone
	// ("zone=eu-west-1a"), which standby placement spreads copies across.
	zonePrefix = "zone="
)

// DefaultCapabilities is what this code supports.
func DefaultCapabilities() []string {
	return []string{CapBeatPair, CapCallStream, CapHandoffGen, CapRevocationKeys, CapSerialIDs, CapSpentHolders, CapStandby, CapStandbyHandoff, CapStreamRefs}
}

// Capabilities is a member's advertised protocol version and capability
// names. It is comparable, so a Member stays comparable; its zero value is
// a protocol-1 peer that advertised nothing.
type Capabilities struct {
	Protocol int
	// list is the names, sorted and comma-joined.
	list string
}

// NewCapabilities returns protocol with the capability names.
func NewCapabilities(protocol int, names ...string) Capabilities {
	var keep []string
	for _, n := range names {
		if n != "" && !strings.ContainsAny(n, ", :") {
			keep = append(keep, n)
		}
	}
	slices.Sort(keep)
	return Capabilities{Protocol: protocol, list: strings.Join(slices.Compact(keep), ",")}
}

// ProtocolVersion is the peer protocol the member speaks (1 when it
// advertised none).
func (c Capabilities) ProtocolVersion() int { return max(c.Protocol, 1) }

// Names lists the capabilities, sorted.
func (c Capabilities) Names() []string {
	if c.list == "" {
		return nil
	}
	return strings.Split(c.list, ",")
}

// Has reports whether name is among c's capabilities. It allocates
// nothing: the forward path asks it on every call.
func (c Capabilities) Has(name string) bool {
	for rest := c.list; rest != ""; {
		var n string
		n, rest, _ = strings.Cut(rest, ",")
		if n == name {
			return true
		}
	}
	return false
}

// capsMarker joins the capabilities to the version string in member
// metadata. Protocol-1 nodes decode metadata strictly (a trailing field or
// an unknown flag makes them ignore the member), but take any version
// string: riding in it keeps a mixed cluster one cluster. They show it as
// the peer's version, which stays true.
const capsMarker = " +peer/"

// withCapabilities appends c to a version string for the metadata.
func withCapabilities(version string, c Capabilities) string {
	if c.Protocol <= 1 && c.list == "" {
		return version
	}
	return version + capsMarker + strconv.Itoa(c.Protocol) + ":" + c.list
}

// splitCapabilities separates a metadata version string into the version
// and the capabilities; a string without them is a protocol-1 peer.
func splitCapabilities(s string) (string, Capabilities) {
	i := strings.LastIndex(s, capsMarker)
	if i < 0 {
		return s, Capabilities{}
	}
	proto, names, ok := strings.Cut(s[i+len(capsMarker):], ":")
	p, err := strconv.Atoi(proto)
	if !ok || err != nil || p < 1 {
		return s, Capabilities{}
	}
	return s[:i], NewCapabilities(p, strings.Split(names, ",")...)
}

// ownCapabilities is what this node advertises: cfg's list, or all of
// DefaultCapabilities when it sets none.
func ownCapabilities(cfg Config) Capabilities {
	names := cfg.Capabilities
	if names == nil {
		names = DefaultCapabilities()
	}
	if cfg.Zone != "" {
		names = append(slices.Clip(names), zonePrefix+cfg.Zone)
	}
	if len(names) == 0 {
		return Capabilities{}
	}
	return NewCapabilities(PeerProtocol, names...)
}

// Zone is the zone the member advertised (its --zone), or "".
func (c Capabilities) Zone() string {
	for _, n := range c.Names() {
		if z, ok := strings.CutPrefix(n, zonePrefix); ok {
			return z
		}
	}
	return ""
}

// usesRefs reports whether req names anything by a stream ref.
func usesRefs(req *peerv1.ReplicateRequest) bool {
	if len(req.GetOrigins()) > 0 || len(req.GetRegistries()) > 0 {
		return true
	}
	for _, d := range req.GetDeltas() {
		if d.GetOriginRef() != 0 || d.GetRegistryRef() != 0 {
			return true
		}
	}
	return false
}

// hasLivePeers reports whether the view holds a live member besides this
// node.
func (c *Cluster) hasLivePeers() bool {
	for _, m := range c.view.list() {
		if !m.Self && m.State.live() {
			return true
		}
	}
	return false
}

// peersSynced reports whether this node has pulled from every live peer
// at least once since it started. A restarted node in a rolling upgrade
// must not take clients before it knows every owner's sessions: one
// anti-entropy round with one peer may skip origins that peer's view does
// not yet accept.
func (c *Cluster) peersSynced() bool {
	c.repl.linksMu.Lock()
	defer c.repl.linksMu.Unlock()
	for _, m := range c.view.list() {
		if m.Self || m.State != StateAlive {
			continue
		}
		l := c.repl.links[m.Name]
		if l == nil || l.origin != m.Origin || !l.synced.Load() {
			return false
		}
	}
	return true
}
