package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/watch"
)

// MemberState is what the view says about a member.
type MemberState int

// Member states. Dead and Left members stay in the view, hidden, until
// DeadGrace has passed.
const (
	// StateAlive: memberlist reports it alive and its gRPC calls succeed.
	StateAlive MemberState = iota
	// StateSuspect: memberlist reports it alive but its gRPC calls fail.
	StateSuspect
	// StateDraining: alive and announcing it is draining.
	StateDraining
	// StateDead: memberlist declared it failed.
	StateDead
	// StateLeft: it left gracefully.
	StateLeft
)

var stateNames = [...]string{"alive", "suspect", "draining", "dead", "left"}

// String returns the state's lowercase name.
func (s MemberState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "state(" + strconv.Itoa(int(s)) + ")"
	}
	return stateNames[s]
}

// live reports whether a member in state s is reachable in principle.
func (s MemberState) live() bool { return s == StateAlive || s == StateSuspect || s == StateDraining }

// Member is one node as seen by this node.
type Member struct {
	Name       string      // node name, stable across restarts
	Epoch      uint64      // this incarnation's epoch, from its metadata
	Origin     crdt.Origin // Name@Epoch: the origin of its registry entries
	GossipAddr string      // memberlist host:port
	GRPCAddr   string      // where its PeerService listens
	State      MemberState // see the MemberState constants
	Version    string      // its software version
	Self       bool        // this node
	// Capabilities is its peer protocol version and capabilities.
	Capabilities Capabilities
}

// nodeMeta is what a node publishes in memberlist metadata.
type nodeMeta struct {
	GRPCAddr string
	Epoch    uint64
	Draining bool
	Leaving  bool // set just before a graceful leave
	Version  string
	Caps     Capabilities // travels inside the version string
}

const metaFormat = 1

// encode writes format byte, flags, uvarint epoch, then length-prefixed
// gRPC address and version. It fails past memberlist's 512-byte limit.
func (m nodeMeta) encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte(metaFormat)
	var flags byte
	if m.Draining {
		flags |= 1
	}
	if m.Leaving {
		flags |= 2
	}
	b.WriteByte(flags)
	b.Write(binary.AppendUvarint(nil, m.Epoch))
	for _, s := range []string{m.GRPCAddr, withCapabilities(m.Version, m.Caps)} {
		b.Write(binary.AppendUvarint(nil, uint64(len(s))))
		b.WriteString(s)
	}
	if b.Len() > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("node metadata is %d bytes, above memberlist's %d", b.Len(), memberlist.MetaMaxSize)
	}
	return b.Bytes(), nil
}

func decodeMeta(p []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(p) < 2 || p[0] != metaFormat {
		return m, errors.New("unknown metadata format")
	}
	if p[1]&^3 != 0 {
		return m, errors.New("unknown metadata flags")
	}
	m.Draining = p[1]&1 != 0
	m.Leaving = p[1]&2 != 0
	p = p[2:]
	e, n := binary.Uvarint(p)
	if n <= 0 || e == 0 {
		return m, errors.New("bad epoch in metadata")
	}
	m.Epoch, p = e, p[n:]
	var strs [2]string
	for i := range strs {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return m, errors.New("truncated metadata")
		}
		strs[i] = string(p[n : n+int(l)])
		p = p[n+int(l):]
	}
	if len(p) != 0 {
		return m, errors.New("trailing bytes in metadata")
	}
	m.GRPCAddr = strs[0]
	m.Version, m.Caps = splitCapabilities(strs[1])
	return m, nil
}

// view is the membership as the rest of the node sees it: memberlist's
// alive/dead/left plus the gRPC suspect overlay. It implements memberlist's
// Delegate and EventDelegate.
type view struct {
	log  *slog.Logger
	met  *metrics
	self string

	mu       sync.Mutex
	meta     nodeMeta           // ours
	members  map[string]*Member // by name, self included
	failing  map[string]bool    // names whose gRPC calls fail
	draining map[string]bool    // names whose metadata says draining
	leaving  map[string]bool    // names whose metadata announces a leave
	watchers watch.Set[Member]
	out      serialQueue[Member]
	changed  chan struct{} // cap 1: wakes the replication loop
	// gen counts member changes, for InSync's memo (the cluster's syncGen).
	gen *atomic.Uint64
}

func newView(self string, meta nodeMeta, log *slog.Logger, met *metrics, gen *atomic.Uint64) *view {
	return &view{
		log: log, met: met, self: self, meta: meta,
		members:  map[string]*Member{},
		failing:  map[string]bool{},
		draining: map[string]bool{},
		leaving:  map[string]bool{},
		changed:  make(chan struct{}, 1),
		gen:      gen,
	}
}

// NodeMeta implements memberlist.Delegate.
func (v *view) NodeMeta(limit int) []byte {
	v.mu.Lock()
	m := v.meta
	v.mu.Unlock()
	b, err := m.encode()
	if err != nil || len(b) > limit {
		v.log.Error("node metadata too large", slog.Int("limit", limit))
		return nil
	}
	return b
}

// NotifyMsg implements memberlist.Delegate: bulk data never rides gossip.
func (v *view) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (v *view) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (v *view) LocalState(bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (v *view) MergeRemoteState([]byte, bool) {}

// NotifyJoin implements memberlist.EventDelegate.
func (v *view) NotifyJoin(n *memberlist.Node) { v.observe(n, false) }

// NotifyLeave implements memberlist.EventDelegate: the node failed, or left
// if its last metadata announced the leave. (memberlist does not keep
// Node.State current, so it is not consulted.)
func (v *view) NotifyLeave(n *memberlist.Node) { v.observe(n, true) }

// NotifyUpdate implements memberlist.EventDelegate.
func (v *view) NotifyUpdate(n *memberlist.Node) { v.observe(n, false) }

func (v *view) observe(n *memberlist.Node, gone bool) {
	meta, err := decodeMeta(n.Meta)
	if err != nil {
		v.log.Warn("ignoring member with unreadable metadata", slog.String("member", n.Name), slog.String("reason", err.Error()))
		v.met.rejected.WithLabelValues("metadata").Inc()
		return
	}
	m := Member{
		Name: n.Name, Epoch: meta.Epoch, Origin: crdt.Origin{Name: n.Name, Epoch: meta.Epoch},
		GossipAddr: n.Address(), GRPCAddr: meta.GRPCAddr, Version: meta.Version, Self: n.Name == v.self, Capabilities: meta.Caps,
	}
	v.mu.Lock()
	old := v.members[n.Name]
	if old != nil && old.Epoch > m.Epoch {
		// A late report about an older incarnation; the newer one stands.
		v.mu.Unlock()
		return
	}
	if gone || (old != nil && old.Epoch != m.Epoch) {
		delete(v.failing, n.Name) // a new link starts with a clean record
	}
	v.draining[n.Name] = meta.Draining || meta.Leaving
	v.leaving[n.Name] = meta.Leaving
	switch {
	case gone && meta.Leaving:
		m.State = StateLeft
	case gone:
		m.State = StateDead
	default:
		m.State = v.liveState(n.Name, meta.Draining || meta.Leaving)
	}
	if old != nil && *old == m {
		v.mu.Unlock()
		return
	}
	v.members[n.Name] = &m
	v.publishLocked(m, old)
	v.mu.Unlock()
	v.flush()
}

func (v *view) liveState(name string, draining bool) MemberState {
	switch {
	case v.failing[name]:
		return StateSuspect
	case draining:
		return StateDraining
	default:
		return StateAlive
	}
}

// publishLocked logs the transition, updates the gauge, queues the member
// for watchers and wakes the loop. v.mu must be held.
func (v *view) publishLocked(m Member, old *Member) {
	from := "none"
	if old != nil {
		from = old.State.String()
		if old.Epoch != m.Epoch {
			from = "epoch " + strconv.FormatUint(old.Epoch, 10)
		}
	}
	v.log.Info("member "+m.State.String(), slog.String("member", m.Origin.String()), slog.String("from", from), slog.String("grpc", m.GRPCAddr))
	v.gen.Add(1)
	v.countLocked()
	v.out.add(m)
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

func (v *view) countLocked() {
	var n [len(stateNames)]int
	for _, m := range v.members {
		n[m.State]++
	}
	for s, c := range n {
		v.met.members.WithLabelValues(stateNames[s]).Set(float64(c))
	}
}

// flush delivers queued member changes to watchers, outside v.mu.
func (v *view) flush() {
	v.out.drain(func(m Member) { v.watchers.Notify(m) })
}

// setFailing records whether gRPC calls to name fail and reports whether the
// member's state changed.
func (v *view) setFailing(name string, epoch uint64, failing bool) bool {
	v.mu.Lock()
	m := v.members[name]
	if m == nil || m.Epoch != epoch || v.failing[name] == failing {
		v.mu.Unlock()
		return false
	}
	v.failing[name] = failing
	if !m.State.live() {
		v.mu.Unlock()
		return false
	}
	old := *m
	m.State = v.liveState(name, v.draining[name])
	if old.State == m.State {
		v.mu.Unlock()
		return false
	}
	v.publishLocked(*m, &old)
	v.mu.Unlock()
	v.flush()
	return true
}

// setMeta changes our own metadata.
func (v *view) setMeta(fn func(*nodeMeta)) nodeMeta {
	v.mu.Lock()
	defer v.mu.Unlock()
	fn(&v.meta)
	return v.meta
}

// forget removes a dead or departed member once its grace has passed, unless
// a newer incarnation replaced it meanwhile.
func (v *view) forget(o crdt.Origin) {
	v.mu.Lock()
	if m := v.members[o.Name]; m != nil && m.Epoch == o.Epoch && !m.State.live() {
		delete(v.members, o.Name)
		delete(v.failing, o.Name)
		delete(v.draining, o.Name)
		delete(v.leaving, o.Name)
		v.gen.Add(1)
		v.countLocked()
	}
	v.mu.Unlock()
}

// peersStaying reports whether some other member is live and has not
// announced that it is leaving: someone who should hear our own leave.
func (v *view) peersStaying() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for name, m := range v.members {
		if name != v.self && m.State.live() && !v.leaving[name] {
			return true
		}
	}
	return false
}

// livePeers counts the other members that are live.
func (v *view) livePeers() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := 0
	for name, m := range v.members {
		if name != v.self && m.State.live() {
			k++
		}
	}
	return k
}

func (v *view) get(name string) (Member, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m, ok := v.members[name]
	if !ok {
		return Member{}, false
	}
	return *m, true
}

// unsorted returns every member, in no order.
func (v *view) unsorted() []Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Member, 0, len(v.members))
	for _, m := range v.members {
		out = append(out, *m)
	}
	return out
}

// list returns every member sorted by name.
func (v *view) list() []Member {
	out := v.unsorted()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (v *view) watch(fn func(Member)) func() { return v.watchers.Add(fn) }

// logWriter turns memberlist's "[LEVEL] memberlist: ..." lines into slog
// records, marked subsystem=memberlist: the node's logger already carries a
// component key, and JSON lines must not repeat a key.
type logWriter struct {
	log     *slog.Logger
	limiter *logLimiter // at most one line per template per window
}

func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			level, line = l, strings.TrimSpace(rest)
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	ok, suppressed := w.limiter.allow(line, time.Now())
	if !ok {
		return len(p), nil
	}
	attrs := []any{slog.String("subsystem", "memberlist")}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed_similar", suppressed))
	}
	w.log.Log(context.Background(), level, line, attrs...)
	return len(p), nil
}

func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{log: l, limiter: newLogLimiter(10 * time.Second)}, "", 0)
}

// resolveSeeds expands "dns:NAME" entries and drops our own address.
func resolveSeeds(ctx context.Context, seeds []string, resolve func(context.Context, string) ([]string, error), selfAddr string) ([]string, error) {
	var out []string
	var errs []error
	for _, s := range seeds {
		name, ok := strings.CutPrefix(s, "dns:")
		if !ok {
			out = append(out, s)
			continue
		}
		addrs, err := resolve(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("resolving %s: %w", name, err))
			continue
		}
		out = append(out, addrs...)
	}
	out = slices.DeleteFunc(out, func(a string) bool { return a == selfAddr })
	slices.Sort(out)
	return slices.Compact(out), errors.Join(errs...)
}

// systemResolver resolves name as SRV records (target:port) and, failing
// that, as A/AAAA records with defaultPort, asking server (host:port) when
// set and the system's DNS servers otherwise.
func systemResolver(defaultPort, server string) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, name string) ([]string, error) {
		var r net.Resolver
		if server != "" {
			r.PreferGo = true
			r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, server)
			}
		}
		if _, srvs, err := r.LookupSRV(ctx, "", "", name); err == nil && len(srvs) > 0 {
			out := make([]string, 0, len(srvs))
			for _, s := range srvs {
				// Resolve the targets with the same resolver: memberlist
				// would ask the system's, which may not know them.
				host := strings.TrimSuffix(s.Target, ".")
				if addrs, err := r.LookupHost(ctx, host); err == nil && len(addrs) > 0 {
					host = addrs[0]
				}
				out = append(out, net.JoinHostPort(host, strconv.Itoa(int(s.Port))))
			}
			return out, nil
		}
		hosts, err := r.LookupHost(ctx, name)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(hosts))
		for _, h := range hosts {
			out = append(out, net.JoinHostPort(h, defaultPort))
		}
		return out, nil
	}
}

var (
	_ memberlist.Delegate      = (*view)(nil)
	_ memberlist.EventDelegate = (*view)(nil)
)
