package mcpswarm

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/prometheus/client_golang/prometheus"
)

// capListener closes, as soon as they are accepted, connections beyond a
// per-source cap or a total cap, so one client (or a flood from many) cannot
// take every file descriptor of the process: gossip's TCP, peer gRPC and
// storage keep theirs. A refused client sees its connection closed at once,
// which is an answer it can act on, rather than a connect that hangs.
type capListener struct {
	net.Listener
	name      string
	perSource int // 0: no per-source cap
	total     int // 0: no total cap
	// loopbackFree exempts loopback sources from the per-source cap: under
	// --dev every client (benchmarks, the conformance suite) is 127.0.0.1.
	loopbackFree bool
	refused      *prometheus.CounterVec
	log          *slog.Logger

	mu       sync.Mutex
	open     int
	bySource map[string]int
	lastWarn time.Time
}

func newCapListener(ln net.Listener, name string, perSource, total int, loopbackFree bool, refused *prometheus.CounterVec, log *slog.Logger) *capListener {
	return &capListener{Listener: ln, name: name, perSource: perSource, total: total, loopbackFree: loopbackFree, refused: refused, log: log, bySource: map[string]int{}}
}

// Accept returns the next connection within the caps; those beyond are
// closed here and never reach the server.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		if reason := l.admit(src); reason != "" {
			_ = c.Close()
			l.refuse(src, reason)
			continue
		}
		return &cappedConn{Conn: c, release: func() { l.release(src) }}, nil
	}
}

// admit counts a new connection from src, or names the cap it would break.
func (l *capListener) admit(src string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total > 0 && l.open >= l.total {
		return "total"
	}
	if l.perSource > 0 && l.bySource[src] >= l.perSource && !(l.loopbackFree && isLoopbackSource(src)) {
		return "per_source"
	}
	l.open++
	l.bySource[src]++
	return ""
}

func (l *capListener) release(src string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.bySource[src]--; l.bySource[src] <= 0 {
		delete(l.bySource, src)
	}
}

// refuse counts a refusal and logs at most one line per 10 s: a flood must
// not also flood the log.
func (l *capListener) refuse(src, reason string) {
	if l.refused != nil {
		l.refused.WithLabelValues(l.name, reason).Inc()
	}
	l.mu.Lock()
	now := time.Now()
	warn := now.Sub(l.lastWarn) >= 10*time.Second
	if warn {
		l.lastWarn = now
	}
	open := l.open
	l.mu.Unlock()
	if warn {
		l.log.Warn("refusing connections over the cap (further refusals for 10 s are only counted in mcpswarm_conns_refused_total)",
			"listener", l.name, "cap", reason, "source", src, "open", open, "per_source_cap", l.perSource, "total_cap", l.total)
	}
}

// sourceOf is the client IP of addr, the unit of the per-source cap.
func sourceOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// cappedConn gives its slot back when closed, once.
type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// isLoopbackSource is authz.IsLoopback for a source from sourceOf.
func isLoopbackSource(src string) bool {
	loop, _ := authz.IsLoopback(src)
	return loop
}
