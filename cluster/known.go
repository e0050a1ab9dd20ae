package cluster

import (
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
)

// knownBucket is the Storage registry holding the gossip addresses of the
// members this node last knew, by name. Declared registries are
// [a-z]{1,32}, so the underscore keeps it apart from every one of them.
const knownBucket = "_members"

// maxKnown bounds the addresses kept; past it, new members are not recorded
// (the seeds and the members already recorded still bring the node back).
const maxKnown = 256

// knownMembers keeps, in the node's store, the gossip address of every peer
// this node has seen alive, and forgets a peer once it has left. A node
// restarted without seeds (the first node of a cluster, or any node whose
// seeds are gone) joins these addresses, so it rejoins the cluster it was
// part of at once instead of waiting for a peer to find it.
type knownMembers struct {
	store Storage
	log   *slog.Logger

	mu    sync.Mutex
	addrs map[string]string // name -> gossip host:port
}

// loadKnown reads the recorded members. A store that cannot be read yields
// none: the node still starts, as a node without seeds.
func loadKnown(st Storage, self string, log *slog.Logger) *knownMembers {
	k := &knownMembers{store: st, log: log, addrs: map[string]string{}}
	err := st.Load(knownBucket, func(name string, addr []byte) error {
		if name == self || len(k.addrs) >= maxKnown {
			return nil
		}
		if _, _, err := net.SplitHostPort(string(addr)); err != nil {
			return nil // not ours to fail on: skip what does not parse
		}
		k.addrs[name] = string(addr)
		return nil
	})
	if err != nil {
		log.Warn("reading the members last known", slog.String("reason", err.Error()))
	}
	return k
}

// names returns the recorded members' names, sorted.
func (k *knownMembers) names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Sorted(maps.Keys(k.addrs))
}

// list returns the recorded addresses, sorted.
func (k *knownMembers) list() []string {
	k.mu.Lock()
	out := slices.Collect(maps.Values(k.addrs))
	k.mu.Unlock()
	slices.Sort(out)
	return slices.Compact(out)
}

// observe records a live peer's address and forgets a peer that left. A
// failed peer stays recorded: it may come back (a partition, a restart).
func (k *knownMembers) observe(m Member) {
	if m.Self || m.GossipAddr == "" {
		return
	}
	k.mu.Lock()
	old, had := k.addrs[m.Name]
	var value []byte
	switch {
	case m.State == StateLeft && had:
		delete(k.addrs, m.Name)
	case m.State.live() && old != m.GossipAddr && (had || len(k.addrs) < maxKnown):
		k.addrs[m.Name] = m.GossipAddr
		value = []byte(m.GossipAddr)
	default:
		k.mu.Unlock()
		return
	}
	// Writing under k.mu keeps the store in the order of the observations.
	err := k.store.Write(knownBucket, m.Name, value, func() error { return nil })
	k.mu.Unlock()
	if err != nil {
		k.log.Warn("recording a member's address", slog.String("member", m.Name), slog.String("reason", err.Error()))
	}
}

// forget drops member name's address: an operator declared it gone for
// good (Cluster.Forget), and a restart must not count it lost again.
func (k *knownMembers) forget(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, had := k.addrs[name]; !had {
		return nil
	}
	delete(k.addrs, name)
	return k.store.Write(knownBucket, name, nil, func() error { return nil })
}
