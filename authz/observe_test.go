package authz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestObservedGuard(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	base := mustProduction(t)
	g := base.Observed(log, m)
	if g.ToolsSource != base.ToolsSource || g.Name != base.Name || g.Authenticator != base.Authenticator {
		t.Fatal("Observed changed more than the authorizers")
	}
	ctx := context.Background()
	alice := httpCtx("alice", "operator")
	g.Tools.Decide(ctx, "swarm_list", nil, alice)      // allow
	g.Tools.Decide(ctx, "s1.form.click", nil, alice)   // ask
	g.Tools.Decide(ctx, "swarm_get_model", nil, alice) // deny
	g.Reads.DecideRead(ctx, "logging/setLevel", nil, alice)
	VisibleTools(ctx, g.Tools, httpCtx("mallory"), []string{"a", "b"}, func(s string) string { return s })

	for _, tc := range []struct {
		surface, outcome string
		want             float64
	}{
		{SurfaceTool, "allow", 1}, {SurfaceTool, "ask", 1}, {SurfaceTool, "deny", 1},
		{SurfaceRead, "deny", 1}, {SurfaceList, "deny", 2},
	} {
		if got := testutil.ToFloat64(m.decisions.WithLabelValues(tc.surface, tc.outcome)); got != tc.want {
			t.Errorf("decisions{%s,%s} = %v, want %v", tc.surface, tc.outcome, got, tc.want)
		}
	}

	// At info: exactly the two denials (tool and read), not the listing.
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("info log has %d lines, want 2:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "INFO", "msg": "authz denied", "principal": "alice", "tool": "swarm_get_model", "decision": "deny", "surface": "tool"}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("log %s = %v, want %v", k, rec[k], v)
		}
	}
	if r, _ := rec["rule"].(string); !strings.HasPrefix(r, "testdata/production.yaml:") {
		t.Errorf("rule %v", rec["rule"])
	}
	if !strings.Contains(lines[1], `"method":"logging/setLevel"`) {
		t.Errorf("read denial: %s", lines[1])
	}

	// At debug every decision is logged.
	buf.Reset()
	dbg := base.Observed(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	dbg.Tools.Decide(ctx, "swarm_list", nil, alice)
	if !strings.Contains(buf.String(), `"level":"DEBUG","msg":"authz decision"`) {
		t.Errorf("debug decision not logged: %s", buf.String())
	}
}

func TestObservedPanicIsLoggedAndPropagated(t *testing.T) {
	var buf bytes.Buffer
	g := Guard{Tools: AuthorizerFunc(func(context.Context, string, map[string]any, Context) Decision { panic("boom") }), Reads: DefaultGuard().Reads}
	g = g.Observed(slog.New(slog.NewTextHandler(&buf, nil)), nil)
	d := SafeDecide(context.Background(), g.Tools, "t", nil, httpCtx("a"))
	if d.Rule != RulePanic {
		t.Errorf("decision %v", d)
	}
	if !strings.Contains(buf.String(), "authz authorizer panicked") || !strings.Contains(buf.String(), "panic=boom") {
		t.Errorf("log: %s", buf.String())
	}
}

func TestMetrics(t *testing.T) {
	if m, err := NewMetrics(nil); m != nil || err != nil {
		t.Fatalf("nil registerer: %v %v", m, err)
	}
	var none *Metrics
	none.ObserveDecision(SurfaceTool, Allow("x")) // must not panic
	none.ObserveAuthentication(nil)

	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveAuthentication(nil)
	m.ObserveAuthentication(ErrNoToken)
	m.ObserveAuthentication(errors.Join(ErrBadToken))
	for result, want := range map[string]float64{"ok": 1, "missing": 1, "invalid": 1} {
		if got := testutil.ToFloat64(m.authn.WithLabelValues(result)); got != want {
			t.Errorf("authentications{%s} = %v", result, got)
		}
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice must fail, not share counters silently")
	}
}
