package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/seal"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/coalesce"
	"github.com/mcpswarm/mcpswarm/internal/watch"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// ErrOwnerUnavailable is returned when the node owning a session is dead,
// hidden or unreachable. The error text names the node.
var ErrOwnerUnavailable = errors.New("owner unavailable")

// ErrNotOwner is returned when the caller's principal does not own the
// session (and is no admin). Its text never reveals who the owner is.
var ErrNotOwner = errors.New("not the owner of this session")

// ErrDraining is returned by Start on a draining node.
var ErrDraining = errors.New("draining")

// ErrExists is returned when a session id is already taken in the swarm.
var ErrExists = errors.New("session id already exists in the swarm")

// DefaultAckTimeout bounds the wait for every live peer to apply a change
// to connection state.
const DefaultAckTimeout = 2 * time.Second

// Config wires a Swarm.
type Config struct {
	// Cluster replicates the registries; its registries are declared by New,
	// so New must run before Cluster.Start.
	Cluster *cluster.Cluster
	// Manager runs the sessions this node owns.
	Manager *session.Manager
	// ForwardTimeout bounds a forwarded call when the caller's context has
	// no deadline (default 10 s: longer than the owner's 5 s update bound).
	ForwardTimeout time.Duration
	// Logger receives routing and conflict logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the swarm's metrics; nil registers none.
	Registerer prometheus.Registerer
	// ConnMaxAge is how long a connection record is kept after its last
	// change: the session ids' maximum age (default mcp.DefaultSessionMaxAge).
	ConnMaxAge time.Duration
	// MaxRevocations bounds the revocations this node holds (default
	// DefaultMaxRevocations); beyond it the oldest give way to a
	// revocation floor (see Conns.RevokedBefore).
	MaxRevocations int
	// IDSerial reads a serial session id's serial (seal.SessionIDs.Serial
	// of a sealer with the cluster's session key). With it, this node
	// revokes serial ids by block and lets the front mint them; without
	// it, every id is revoked by digest.
	IDSerial func(id string) (seal.IDSerial, bool)
	// AckTimeout bounds how long a change to connection state waits for
	// every live peer to apply it before it is answered (default 2 s). A
	// peer that misses it is waited out until its lease has lapsed, so it
	// refuses the connection (Conns.CanServe) until it has caught up by
	// anti-entropy.
	AckTimeout time.Duration
	// Storage, when set, keeps the spent request states this node holds
	// across restarts (in a bucket of its own, never replicated); without
	// it they are held in memory only.
	Storage cluster.Storage
	// Standbys, when set, is this node's side of session replication:
	// its sessions' in-sync standbys go into their records, and the
	// copies it holds are promoted when their owner dies (failover.go).
	Standbys Standbys
	// Tasks bounds the task table (Tasks); zero fields take the defaults.
	Tasks task.Limits
}

// Swarm is the cluster-wide view and router for one node.
type Swarm struct {
	cl       *cluster.Cluster
	mgr      *session.Manager
	self     string
	log      *slog.Logger
	timeout  time.Duration
	sessions *cluster.Registry
	tools    *cluster.Registry
	conns    *Conns
	nonces   *Nonces
	tasks    *taskStore
	idx      *index
	met      *metrics

	mu sync.Mutex
	// unavailable holds the last record of sessions whose owner is hidden,
	// so a call answers "owner unavailable: node X" rather than "not
	// running" until the grace period deletes them.
	unavailable map[string]sessionRecord
	// superseded holds the local sessions stopped because another node
	// took them over (Superseded), until that node's record arrives.
	superseded map[string]superseded
	// rev counts local resource changes per session, published in the
	// session record.
	rev map[string]map[string]uint64
	// toolGen counts the tool-set changes of each local session
	// (toolshare.go): session id -> *atomic.Uint64. Every call reads it
	// twice, so it is read without mu (at 16 clients, those reads were the
	// node's most waited-for lock).
	toolGen sync.Map
	// toolsMu orders the writes of tool sets, so an older set read before
	// a newer one is never written after it.
	toolsMu  sync.Mutex
	revs     revThrottle // when revision-only record writes go out (publish.go)
	watchers watch.Set[mcp.Event]
	draining bool
	// handoffs holds the sessions this node is handing or has handed off.
	handoffs handoffs

	connMaxAge time.Duration
	idSerial   func(id string) (seal.IDSerial, bool)
	// maxRevocations is Config.MaxRevocations.
	maxRevocations int
	ackTimeout     time.Duration

	// streams are this node's Calls streams to its peers (callstream.go).
	streams callStreams
	// callsLimit bounds the calls a peer runs at once on one Calls stream
	// it opened to this node (maxStreamCalls).
	callsLimit int

	// frontPtr is this node's MCP front, attached by mcp.New (Attach):
	// what other nodes forward to this node is delivered to it.
	frontPtr atomic.Pointer[frontBox]

	pending  map[string]dirty
	kick     coalesce.Signal
	loopDone chan struct{}
	stopLoop context.CancelFunc

	stopMgr     func()
	stopMembers func()

	// standbys is Config.Standbys; failKick wakes the failover loop.
	standbys Standbys
	failKick coalesce.Signal
	failDone chan struct{}
	deaths   deaths
	// tasksDone closes when the task table's upkeep has stopped.
	tasksDone chan struct{}
	// spentDone closes when the loop copying spent states to their new
	// holders has stopped (Nonces.rebalanceLoop).
	spentDone chan struct{}
}

// New declares the swarm's registries and adds the forward service to the
// cluster. Call it before cluster.Start and cluster.Register; attach the
// MCP front by giving the swarm to mcp.New as its Cluster.
func New(cfg Config) (*Swarm, error) {
	if cfg.Cluster == nil || cfg.Manager == nil {
		return nil, errors.New("swarm: Cluster and Manager are required")
	}
	s := &Swarm{
		cl:          cfg.Cluster,
		mgr:         cfg.Manager,
		self:        cfg.Cluster.Self().Name,
		log:         cfg.Logger,
		timeout:     cfg.ForwardTimeout,
		unavailable: map[string]sessionRecord{},
		superseded:  map[string]superseded{},
		rev:         map[string]map[string]uint64{},
		pending:     map[string]dirty{},
		idx:         newIndex(),
		kick:        coalesce.NewSignal(),
		callsLimit:  maxStreamCalls,
		standbys:    cfg.Standbys,
		failKick:    coalesce.NewSignal(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	s.ackTimeout = cfg.AckTimeout
	if s.ackTimeout <= 0 {
		s.ackTimeout = DefaultAckTimeout
	}
	s.connMaxAge = cfg.ConnMaxAge
	s.maxRevocations = cfg.MaxRevocations
	s.idSerial = cfg.IDSerial
	if s.connMaxAge <= 0 {
		s.connMaxAge = mcp.DefaultSessionMaxAge
	}
	var err error
	if s.sessions, err = cfg.Cluster.Registry(regSessions); err != nil {
		return nil, fmt.Errorf("declaring sessions registry: %w", err)
	}
	if s.tools, err = cfg.Cluster.Registry(regTools); err != nil {
		return nil, fmt.Errorf("declaring tools registry: %w", err)
	}
	connReg, err := cfg.Cluster.Registry(regConns)
	if err != nil {
		return nil, fmt.Errorf("declaring conns registry: %w", err)
	}
	s.conns = newConns(s, connReg)
	nonceReg, err := cfg.Cluster.Registry(regNonces)
	if err != nil {
		return nil, fmt.Errorf("declaring nonces registry: %w", err)
	}
	held, err := newSpentStore(cfg.Storage, time.Now())
	if err != nil {
		return nil, err
	}
	s.nonces = newNonces(s, nonceReg, held)
	taskReg, err := cfg.Cluster.Registry(regTasks)
	if err != nil {
		return nil, fmt.Errorf("declaring tasks registry: %w", err)
	}
	s.tasks = newTaskStore(s, taskReg, cfg.Tasks)
	if s.met, err = newMetrics(cfg.Registerer, s); err != nil {
		return nil, fmt.Errorf("registering swarm metrics: %w", err)
	}
	s.sessions.OnChange(s.onSessionChange)
	s.sessions.OnHiddenChange(s.onHiddenSessionChange)
	s.tools.OnChange(s.onToolsChange)
	// The forward service rides the cluster's gRPC server and peer
	// connections, under the peer credential; the previous release's
	// forwarding RPCs of the peer service stay served for one release.
	cfg.Cluster.AddService(func(r grpc.ServiceRegistrar) {
		forwardv1.RegisterForwardServiceServer(r, forwardServer{s: s})
	})
	cfg.Cluster.SetForwardHandler(legacyHandler{forwardServer{s: s}})
	return s, nil
}

// StartPublishing publishes the sessions this node runs (after
// session.Manager.Restore and cluster.Start), removes registry entries
// restored from disk whose session did not come back, and then follows
// local session events.
func (s *Swarm) StartPublishing(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopLoop, s.loopDone, s.failDone, s.spentDone = cancel, make(chan struct{}), make(chan struct{}), make(chan struct{})
	s.tasksDone = make(chan struct{})
	s.conns.restore()
	s.tasks.start(ctx, s.tasksDone)
	go s.publishLoop(ctx)
	go s.failoverLoop(ctx)
	go s.nonces.rebalanceLoop(ctx, s.spentDone)
	s.failKick.Kick() // owners that died while this node was down
	s.stopMgr = s.mgr.Subscribe(s.onLocalEvent)
	s.stopMembers = s.cl.WatchMembers(func(m cluster.Member) {
		s.deaths.note(m)
		s.nonces.membersChanged()
		s.tasks.kick.Kick()
		s.emit(mcp.Event{Kind: mcp.MembersChanged})
	})
	own := s.cl.Origin()
	var stale []string
	s.sessions.Range(func(e crdt.Entry) bool {
		if e.Origin == own {
			if _, ok := s.mgr.Get(e.Key); !ok {
				stale = append(stale, e.Key)
			}
		}
		return true
	})
	for _, id := range stale {
		s.unpublish(id)
	}
	for _, info := range s.mgr.List() {
		s.writeThrough(info.ID)
		err := s.publishRecord(info)
		if err == nil {
			err = s.publishTools(info.ID, info.Principal)
		}
		if _, running := s.mgr.Get(info.ID); err != nil && !running {
			// Stopped meanwhile (an admin call): its stop event unpublishes it.
			continue
		}
		if err != nil {
			return fmt.Errorf("publishing restored session %s: %w", info.ID, err)
		}
	}
	return nil
}

// StopPublishing stops following local events. The registries go with the
// cluster.
func (s *Swarm) StopPublishing() {
	if s.stopMgr != nil {
		s.stopMgr()
	}
	if s.stopMembers != nil {
		s.stopMembers()
	}
	if s.stopLoop != nil {
		s.stopLoop()
		<-s.loopDone
		<-s.failDone
		<-s.spentDone
		<-s.tasksDone
		s.stopLoop = nil
	}
}

// Nonces is the cluster-wide record of spent single-use tokens.
func (s *Swarm) Nonces() *Nonces { return s.nonces }

// Conns is the cluster-wide connection registry for the MCP front.
func (s *Swarm) Conns() *Conns { return s.conns }

// record is the sessions-registry record of a local session.
func (s *Swarm) record(info session.Info) sessionRecord {
	rec := sessionRecord{App: info.App, Principal: info.Principal, Created: info.Created, Status: info.Status, Node: s.self, Handoff: info.Handoff}
	if s.standbys != nil {
		rec.Standbys = s.standbys.InSync(info.ID)
		for node, since := range s.standbys.Behind(info.ID) {
			if rec.Behind == nil {
				rec.Behind = map[string]int64{}
			}
			rec.Behind[node] = since.UnixMilli()
		}
	}
	s.mu.Lock()
	if r := s.rev[info.ID]; len(r) > 0 {
		rec.Rev = make(map[string]uint64, len(r))
		for k, v := range r {
			rec.Rev[k] = v
		}
	}
	s.mu.Unlock()
	return rec
}

// publishRecord writes a local session's record.
func (s *Swarm) publishRecord(info session.Info) error {
	return s.putRecord(info.ID, s.record(info))
}

// putRecord writes rec as local session id's record.
func (s *Swarm) putRecord(id string, rec sessionRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.sessions.Put(id, b)
}

func (s *Swarm) publishTools(id, principal string) error {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	tools, err := s.mgr.Tools(id)
	if err != nil {
		return err
	}
	b, err := json.Marshal(toolsRecord{Principal: principal, Tools: tools})
	if err != nil {
		return err
	}
	return s.tools.Put(id, b)
}

func (s *Swarm) unpublish(id string) {
	own := s.cl.Origin()
	var principal string
	if loc, ok := s.idx.locate(id); ok && loc.origin == own {
		principal = loc.rec.Principal
	}
	s.idx.setSession(id, own, nil)
	if s.idx.setTools(id, own, nil) {
		s.emit(mcp.Event{Kind: mcp.ToolsChanged, Principal: principal, Session: id})
	}
	if err := s.tools.Remove(id); err != nil {
		s.log.Warn("removing tools record", "session", id, "err", err)
	}
	if err := s.sessions.Remove(id); err != nil {
		s.log.Warn("removing session record", "session", id, "err", err)
	}
	s.mu.Lock()
	delete(s.rev, id)
	s.mu.Unlock()
	s.toolGen.Delete(id)
}

// SetDraining makes Start refuse new sessions on this node.
func (s *Swarm) SetDraining(draining bool) {
	s.mu.Lock()
	s.draining = draining
	s.mu.Unlock()
}
