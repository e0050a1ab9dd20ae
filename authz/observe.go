package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Decision surfaces, the "surface" label of the decision counter.
const (
	SurfaceTool = "tool" // tools/call
	SurfaceRead = "read" // the read methods
	SurfaceList = "list" // per-entry tools/list filtering
)

// Metrics counts authorization decisions and authentications. A nil
// *Metrics counts nothing.
type Metrics struct {
	decisions *prometheus.CounterVec
	authn     *prometheus.CounterVec
}

// NewMetrics registers the authz counters with reg:
//
//	mcpswarm_authz_decisions_total{surface="tool|read|list",outcome="allow|ask|deny"}
//	mcpswarm_authz_authentications_total{result="ok|missing|invalid"}
//
// A nil reg returns a nil *Metrics: no metrics.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcpswarm", Subsystem: "authz", Name: "decisions_total",
			Help: "Authorization decisions by surface and outcome.",
		}, []string{"surface", "outcome"}),
		authn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcpswarm", Subsystem: "authz", Name: "authentications_total",
			Help: "Bearer-token authentications by result.",
		}, []string{"result"}),
	}
	if err := reg.Register(m.decisions); err != nil {
		return nil, fmt.Errorf("registering authz decision metrics: %w", err)
	}
	if err := reg.Register(m.authn); err != nil {
		reg.Unregister(m.decisions)
		return nil, fmt.Errorf("registering authz authentication metrics: %w", err)
	}
	return m, nil
}

// ObserveDecision counts d on surface.
func (m *Metrics) ObserveDecision(surface string, d Decision) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(surface, d.Kind.String()).Inc()
}

// ObserveAuthentication counts the outcome of Authenticate: nil is "ok",
// ErrNoToken "missing", anything else "invalid".
func (m *Metrics) ObserveAuthentication(err error) {
	if m == nil {
		return
	}
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrNoToken):
		result = "missing"
	default:
		result = "invalid"
	}
	m.authn.WithLabelValues(result).Inc()
}

// Observed returns g with both authorizers wrapped so that every decision is
// counted in m and logged to log: at debug, except denials of tools/call and
// of read methods, which are logged at info with the principal, the tool or
// method, the rule and the reason. Per-entry tools/list decisions (see
// Listing) are logged at debug only. Sources, limits and the authenticator
// are unchanged. A nil log discards.
func (g Guard) Observed(log *slog.Logger, m *Metrics) Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if g.Tools != nil {
		g.Tools = observedTools{inner: g.Tools, log: log, m: m}
	}
	if g.Reads != nil {
		g.Reads = observedReads{inner: g.Reads, log: log, m: m}
	}
	return g
}

type observedTools struct {
	inner Authorizer
	log   *slog.Logger
	m     *Metrics
}

func (o observedTools) Decide(ctx context.Context, tool string, args map[string]any, c Context) Decision {
	surface := SurfaceTool
	if Listing(ctx) {
		surface = SurfaceList
	}
	defer logPanic(ctx, o.log, surface, "tool", tool, c)
	d := o.inner.Decide(ctx, tool, args, c)
	o.m.ObserveDecision(surface, d)
	logDecision(ctx, o.log, surface, "tool", tool, c, d)
	return d
}

type observedReads struct {
	inner ReadAuthorizer
	log   *slog.Logger
	m     *Metrics
}

func (o observedReads) DecideRead(ctx context.Context, method string, params any, c Context) Decision {
	defer logPanic(ctx, o.log, SurfaceRead, "method", method, c)
	d := o.inner.DecideRead(ctx, method, params, c)
	o.m.ObserveDecision(SurfaceRead, d)
	logDecision(ctx, o.log, SurfaceRead, "method", method, c, d)
	return d
}

func logDecision(ctx context.Context, log *slog.Logger, surface, nameKey, name string, c Context, d Decision) {
	level := slog.LevelDebug
	msg := "authz decision"
	if d.Kind != KindAllow && d.Kind != KindAsk && surface != SurfaceList {
		level, msg = slog.LevelInfo, "authz denied"
	}
	if !log.Enabled(ctx, level) {
		return
	}
	log.LogAttrs(ctx, level, msg,
		slog.String("surface", surface),
		slog.String("principal", c.Principal.Subject),
		slog.String(nameKey, name),
		slog.String("decision", d.Kind.String()),
		slog.String("rule", d.Rule),
		slog.String("detail", d.Detail()),
		slog.String("transport", string(c.Transport)),
		slog.String("conn", c.ConnID),
	)
}

// logPanic logs a panicking authorizer and lets the panic continue: the
// caller (SafeDecide, VisibleTools) decides what a panic means.
func logPanic(ctx context.Context, log *slog.Logger, surface, nameKey, name string, c Context) {
	if r := recover(); r != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "authz authorizer panicked",
			slog.String("surface", surface),
			slog.String("principal", c.Principal.Subject),
			slog.String(nameKey, name),
			slog.Any("panic", r),
		)
		panic(r)
	}
}
