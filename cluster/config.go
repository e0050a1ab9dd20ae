package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// Config configures a Cluster. Start from DefaultConfig (LAN timers) or
// LocalConfig (loopback and tests) and set Name, GossipAddr, GRPCAddr and
// Key. A zero duration or count means "use the DefaultConfig value". The
// Config must not be changed after it is passed to New.
type Config struct {
	// Name is the node name: stable across restarts (the pod name).
	Name string
	// GossipAddr is the host:port memberlist binds (TCP and UDP). Port 0
	// picks an ephemeral port.
	GossipAddr string
	// AdvertiseAddr is the host advertised to other members; "" advertises
	// the bound address.
	AdvertiseAddr string
	// GRPCAddr is this node's gRPC address as peers should dial it. It
	// travels in the memberlist metadata.
	GRPCAddr string
	// Join lists seed gossip addresses (host:port) or "dns:NAME" entries that
	// are resolved (SRV, then A) and re-resolved while the node is alone.
	Join []string
	// Key is the 32-byte cluster key. The gossip encryption key and the peer
	// credential are derived from it with HKDF under distinct labels.
	Key []byte
	// DataDir holds the bbolt file (node.db). "" keeps everything in memory.
	DataDir string
	// NoSync skips fsync on the bbolt file: a machine crash may lose the
	// latest writes. For tests and benchmarks.
	NoSync bool
	// Storage overrides DataDir with a caller-provided store (tests).
	Storage Storage
	// Version is this node's software version, carried in the metadata.
	Version string
	// Zone is this node's failure domain (a Kubernetes topology zone),
	// advertised to peers for standby placement; empty when unknown. It
	// must not contain commas, colons or spaces.
	Zone string
	// Capabilities lists the peer capabilities this node advertises (see
	// capability.go); nil means all of DefaultCapabilities, an empty list
	// a protocol-1 node (tests use it to run a previous-version peer).
	Capabilities []string
	// Memberlist, if set, adjusts the memberlist configuration after the
	// cluster has filled it in (tests: short timers, a wrapped transport).
	Memberlist func(*memberlist.Config)
	// ProbeInterval, when positive, sets how often memberlist probes a
	// member, after Memberlist: the probe timeout becomes half of it (the
	// LAN timers' ratio) and the suspicion, SuspicionMult probe intervals,
	// scales with it. With the LAN timers and three nodes a silent member
	// is declared dead about 4.5 to 6 intervals after it fell silent; a
	// member paused longer than that is declared dead too. Zero keeps
	// Memberlist's timers (memberlist's LAN 1 s by default).
	ProbeInterval time.Duration
	// DeadGrace is how long a dead or departed origin's entries stay hidden
	// before they are deleted.
	DeadGrace time.Duration
	// BatchDelay is how long local deltas are collected before a push.
	BatchDelay time.Duration
	// AntiEntropy is the period of the digest exchange with one random
	// peer; each round is jittered by up to ±25 %.
	AntiEntropy time.Duration
	// AntiEntropyQuiet is the longest period rounds stretch to while
	// nothing changes: after each round that found no write, no remote
	// change and no membership change since the one before, the next waits
	// twice as long, up to this. Any change brings AntiEntropy back. The
	// maps' logical clocks still advance once per AntiEntropy.
	AntiEntropyQuiet time.Duration
	// PeerQueue bounds the batches queued for one peer; when it is full the
	// batch is dropped for that peer, which then repairs by catch-up.
	PeerQueue int
	// Dialer, if set, dials peers' gRPC addresses (fault tests).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// TLS, if set, is used to dial peers; nil dials in plaintext (the
	// credential is still required).
	TLS *tls.Config
	// Logger receives the cluster's logs; nil discards them. The cluster
	// adds no node name: give it a logger that carries one (the node's).
	Logger *slog.Logger
	// Registerer receives the cluster's metrics; nil registers none.
	Registerer prometheus.Registerer

	// MaxMessageBytes bounds one peer message in either direction.
	MaxMessageBytes int
	// SnapshotChunkBytes bounds the entries of one snapshot chunk.
	SnapshotChunkBytes int
	// StreamIdle is how long a Replicate stream may stay silent before the
	// receiver cuts it; a stream with nothing else to send heartbeats at
	// least every StreamIdle/2 (and every min(StreamIdle, Lease)·2/5 unless
	// its peer's heartbeats renew the leases both ways, CapBeatPair).
	StreamIdle time.Duration
	// CatchUpTimeout bounds one whole catch-up or digest call.
	CatchUpTimeout time.Duration
	// Lease is how long a node trusts that it holds everything a live peer
	// wrote after the last in-order, gap-free message it applied from that
	// peer (lease.go). Past it the node is behind: InSync fails and it must
	// not serve connection state. Senders heartbeat every min(StreamIdle,
	// Lease)·2/5; a writer whose peer missed an acknowledgement waits until
	// that peer's lease has surely lapsed (Lease + 250 ms after its last
	// send to it). Keep Lease + 250 ms below the swarm's acknowledgement
	// bound, so that wait never outlasts it.
	Lease time.Duration
	// Clock drives the cluster's own timers: heartbeats and stream idle
	// cuts, leases and the wait for a lapsed lease, anti-entropy rounds and
	// the dead grace; nil is the wall clock. memberlist, gRPC and the batch
	// delay keep wall time whatever is set here (tests: a fake clock).
	Clock clockwork.Clock
	// SuspectAfter is how many consecutive failed gRPC attempts to a peer
	// that memberlist still reports alive mark it suspect.
	SuspectAfter int
	// RetryMin and RetryMax bound the jittered exponential backoff between
	// attempts to re-open a peer stream.
	RetryMin, RetryMax time.Duration
	// JoinRetry is how often a node that is alone re-resolves and re-joins
	// its seeds.
	JoinRetry time.Duration
	// Reconnect is how often a node tries to rejoin dead members and seeds
	// that are not members, so partitions heal.
	Reconnect time.Duration
	// Resolve resolves a "dns:NAME" seed to host:port addresses; nil uses
	// the system resolver (SRV, then A with this node's gossip port).
	Resolve func(ctx context.Context, name string) ([]string, error)
	// DNSServer, when set (host:port), is the DNS server the system
	// resolver asks for "dns:NAME" seeds instead of /etc/resolv.conf's.
	DNSServer string
	// CRDT sets the per-registry map bounds; its Registry field is ignored.
	// The maps tick once per anti-entropy round, so DropMemory counts
	// rounds: how long a deleted origin's epoch stays refused. The cluster
	// refuses relayed data of dead and unknown origins itself, so this only
	// needs to outlast in-flight messages; keeping it short lets a member
	// wrongly declared dead (a long partition) come back with the same epoch.
	CRDT crdt.Config
}

// DefaultConfig returns LAN settings: memberlist's LAN timers, 30 s grace,
// 5 ms batching and a 1 s anti-entropy round, stretching to 8 s at rest.
func DefaultConfig() Config {
	return Config{
		GossipAddr:         "0.0.0.0:7946",         // memberlist's conventional port
		DeadGrace:          30 * time.Second,       // hidden → deleted, as Phoenix's down period
		BatchDelay:         5 * time.Millisecond,   // a few ms of batching per push
		AntiEntropy:        time.Second,            // digest exchange with one random peer
		AntiEntropyQuiet:   8 * time.Second,        // at rest: a gap in a peer's own deltas is found by heartbeats, not by this
		PeerQueue:          256,                    // batches per peer before dropping to catch-up
		MaxMessageBytes:    4 << 20,                // gRPC's default receive limit
		SnapshotChunkBytes: 256 << 10,              // well below MaxMessageBytes
		StreamIdle:         15 * time.Second,       // a quiet stream heartbeats every 7.5 s
		CatchUpTimeout:     30 * time.Second,       // room for a 100k-entry snapshot on a slow link
		Lease:              17 * time.Second / 10,  // + 250 ms below the swarm's 2 s acknowledgement bound: heartbeat every 680 ms
		Clock:              nil,                    // wall clock
		SuspectAfter:       3,                      // three failed attempts in a row
		RetryMin:           100 * time.Millisecond, // first re-dial
		RetryMax:           5 * time.Second,        // backoff ceiling
		JoinRetry:          5 * time.Second,        // re-resolve seeds while alone
		Reconnect:          2 * time.Second,        // rejoin dead members and absent seeds: a healed partition merges within seconds
		CRDT:               defaultCRDT(),          // log 1024 deltas / 1 MiB, keys 256 B, values 1 MiB, drop memory 60 rounds
		Memberlist:         nil,                    // memberlist.DefaultLANConfig timers as they are
		ProbeInterval:      0,                      // memberlist's LAN 1 s
		Logger:             nil,                    // discard
		Registerer:         nil,                    // no metrics
		Dialer:             nil,                    // net.Dialer
		Resolve:            nil,                    // system resolver
		TLS:                nil,                    // plaintext + credential
		Join:               nil,                    // alone
		Version:            "",                     // set by the binary
		Key:                nil,                    // required
		DataDir:            "",                     // in memory
		Storage:            nil,                    // from DataDir
		AdvertiseAddr:      "",                     // the bound address
		GRPCAddr:           "",                     // required
		Name:               "",                     // required
	}
}

// LocalConfig returns short timers for loopback clusters and tests: failures
// are detected in about a second and dead entries deleted after 2 s.
func LocalConfig() Config {
	c := DefaultConfig()
	c.GossipAddr = "127.0.0.1:0"        // ephemeral loopback port
	c.DeadGrace = 2 * time.Second       // hidden → deleted
	c.BatchDelay = 2 * time.Millisecond // tighter batching on loopback
	c.AntiEntropy = 200 * time.Millisecond
	c.AntiEntropyQuiet = 1600 * time.Millisecond
	c.StreamIdle = 3 * time.Second // a quiet stream heartbeats every other period
	c.CatchUpTimeout = 10 * time.Second
	c.RetryMin = 20 * time.Millisecond
	c.RetryMax = 500 * time.Millisecond
	c.JoinRetry = 200 * time.Millisecond
	c.Reconnect = time.Second
	c.Memberlist = LocalMemberlist // probe every 250 ms, gossip every 100 ms
	return c
}

// LocalMemberlist shortens memberlist's timers for loopback clusters: probe
// every 250 ms, a silent node is declared dead after about 1 to 2 s. It keeps
// one confirmation in the suspicion so a CPU-starved test machine does not
// declare live nodes dead. LocalConfig uses it.
//
// A join spreads as a gossip broadcast that memberlist sends a bounded
// number of times (RetransmitMult × log10(n+1), rounded up), and it
// piggybacks the same broadcast on probes and acks: with a multiplier of 2,
// a three-node cluster's two transmissions could both go to the joiner and
// its seed, and the third node then learnt of the joiner only from the next
// push/pull, 5 s later (1 start in about 75 measured; see
// e2e.TestThreeNodeStartsConverge). Memberlist's default multiplier and a
// 1 s push/pull bound that window.
func LocalMemberlist(mc *memberlist.Config) {
	mc.ProbeInterval = 250 * time.Millisecond  // one probe per interval
	mc.ProbeTimeout = 200 * time.Millisecond   // loopback RTT is far below, but the CPU may be busy
	mc.SuspicionMult = 3                       // min suspicion 3 × interval = 750 ms, one confirmation
	mc.GossipInterval = 100 * time.Millisecond // half of memberlist's LAN 200 ms: a join still spreads in well under the 1 s push/pull
	mc.PushPullInterval = time.Second          // full state sync: the backstop when gossip lost a join (a few hundred bytes on loopback)
	mc.TCPTimeout = time.Second                // push/pull and fallback probes
	mc.GossipToTheDeadTime = 5 * time.Second   // keep telling the dead they are dead
	mc.IndirectChecks = 2                      // ask two others before suspecting
	mc.RetransmitMult = 4                      // memberlist's default; see below
	mc.DeadNodeReclaimTime = time.Millisecond  // a restarted node may reuse its name at once
}

func defaultCRDT() crdt.Config {
	c := crdt.DefaultConfig()
	c.DropMemory = 60 // anti-entropy rounds: about a minute with DefaultConfig
	return c
}

var registryName = regexp.MustCompile(`^[a-z]{1,32}$`)

// withDefaults fills zero fields from DefaultConfig and checks the rest.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.DeadGrace <= 0 {
		c.DeadGrace = d.DeadGrace
	}
	if c.BatchDelay <= 0 {
		c.BatchDelay = d.BatchDelay
	}
	if c.AntiEntropy <= 0 {
		c.AntiEntropy = d.AntiEntropy
	}
	if c.AntiEntropyQuiet <= 0 {
		c.AntiEntropyQuiet = d.AntiEntropyQuiet
	}
	if c.PeerQueue <= 0 {
		c.PeerQueue = d.PeerQueue
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.SnapshotChunkBytes <= 0 {
		c.SnapshotChunkBytes = d.SnapshotChunkBytes
	}
	if c.StreamIdle <= 0 {
		c.StreamIdle = d.StreamIdle
	}
	if c.Lease <= 0 {
		c.Lease = d.Lease
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.CatchUpTimeout <= 0 {
		c.CatchUpTimeout = d.CatchUpTimeout
	}
	if c.SuspectAfter <= 0 {
		c.SuspectAfter = d.SuspectAfter
	}
	if c.RetryMin <= 0 {
		c.RetryMin = d.RetryMin
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(d.RetryMax, c.RetryMin)
	}
	if c.JoinRetry <= 0 {
		c.JoinRetry = d.JoinRetry
	}
	if c.Reconnect <= 0 {
		c.Reconnect = d.Reconnect
	}
	if c.CRDT == (crdt.Config{}) {
		c.CRDT = d.CRDT
	}
	if c.GossipAddr == "" {
		c.GossipAddr = d.GossipAddr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.ProbeInterval < 0 {
		errs = append(errs, fmt.Errorf("probe interval must not be negative, got %s", c.ProbeInterval))
	}
	if !crdt.ValidName(c.Name) {
		errs = append(errs, fmt.Errorf("name %q must be 1 to 64 of [A-Za-z0-9._-]", c.Name))
	}
	if c.Zone != "" && !crdt.ValidName(c.Zone) {
		errs = append(errs, fmt.Errorf("zone %q must be 1 to 64 of [A-Za-z0-9._-]", c.Zone))
	}
	if len(c.Key) != 32 {
		errs = append(errs, fmt.Errorf("cluster key must be 32 bytes, got %d", len(c.Key)))
	}
	if c.GRPCAddr == "" {
		errs = append(errs, errors.New("grpc address must be set"))
	}
	if _, _, err := net.SplitHostPort(c.GossipAddr); err != nil {
		errs = append(errs, fmt.Errorf("gossip address %q must be host:port", c.GossipAddr))
	}
	if c.SnapshotChunkBytes > c.MaxMessageBytes/2 {
		errs = append(errs, errors.New("snapshot chunk bytes must be at most half of max message bytes"))
	}
	return c, errors.Join(errs...)
}
