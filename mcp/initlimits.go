package mcp

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// Defaults of the initialize bounds (issue #13: 100 initializes carrying
// 0.9 MB of clientInfo and capabilities each cost +390 MiB on the entry
// node and +150–230 MiB on every peer, kept for the session id's 7 days).
const (
	// DefaultClientFactsBytes bounds the JSON of clientInfo plus
	// capabilities that one initialize may declare; real clients send a
	// few hundred bytes.
	DefaultClientFactsBytes = 16 << 10
	// DefaultInitializesPerMinute bounds the initializes of one principal
	// (or, unauthenticated, one client IP).
	DefaultInitializesPerMinute = 120
)

// initGate bounds what initialize can make the cluster store: the size of
// the facts a connection declares, which the conns registry keeps on every
// node, and how often one principal may declare new ones.
type initGate struct {
	maxFacts  int
	perMinute int
	limiter   *authz.RateLimiter
	// loopbackFree exempts unauthenticated loopback clients from the rate:
	// under --dev every client (benchmarks, the conformance suite) is one
	// IP, 127.0.0.1.
	loopbackFree bool
	// conns bounds an authenticated principal's connections across the
	// swarm (limits.connections_per_principal).
	conns *connCap
}

func newInitGate(l authz.Limits, dev bool, idle time.Duration) *initGate {
	g := &initGate{maxFacts: l.ClientFactsBytes, perMinute: l.InitializesPerMinute, loopbackFree: dev,
		conns: newConnCap(l.ConnectionsPerPrincipal, idle)}
	if g.maxFacts <= 0 {
		g.maxFacts = DefaultClientFactsBytes
	}
	if g.perMinute <= 0 {
		g.perMinute = DefaultInitializesPerMinute
	}
	g.limiter = authz.NewRateLimiter(authz.Limits{CallsPerSecond: float64(g.perMinute) / 60, CallBurst: g.perMinute})
	return g
}

// check answers an initialize that breaks a bound, naming the bound and
// the policy setting that raises it; it returns the HTTP status to answer
// with, or 0 when the request may pass.
func (g *initGate) check(r *http.Request, env wire.Envelope) (*rpcError, int) {
	if env.Method != "initialize" {
		return nil, 0
	}
	var p struct {
		ClientInfo   json.RawMessage `json:"clientInfo"`
		Capabilities json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(env.Params, &p) // initialize reports malformed params itself
	if n := len(p.ClientInfo) + len(p.Capabilities); n > g.maxFacts {
		return &rpcError{ID: env.ID, Code: codeInvalidParams, Message: fmt.Sprintf(
			"initialize: clientInfo and capabilities hold %d bytes of JSON; at most %d are accepted (policy limits.client_facts_bytes)", n, g.maxFacts)}, http.StatusBadRequest
	}
	who, loopback := initKey(r)
	if g.loopbackFree && loopback {
		return nil, 0
	}
	if !g.limiter.Allow(who) {
		return &rpcError{ID: env.ID, Code: codeInvalidRequest, Message: fmt.Sprintf(
			"initialize: more than %d initializes per minute for %s (policy limits.initializes_per_minute); reuse the session or retry later", g.perMinute, who)}, http.StatusTooManyRequests
	}
	// Only an initialize that passed every refusal makes room.
	g.conns.admit(boundSubject(r.Context()))
	return nil, 0
}

// initKey is whom the initialize rate is counted against: the verified
// principal, or the client's IP when the request is not authenticated (and
// then whether that IP is loopback).
func initKey(r *http.Request) (string, bool) {
	if sub := boundSubject(r.Context()); sub != "" {
		return "principal " + strconv.Quote(sub), false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	loop, _ := authz.IsLoopback(host)
	return "client " + host, loop
}
