package authz

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func loadProduction(t testing.TB) *Policy {
	t.Helper()
	p, err := LoadPolicyFile("testdata/production.yaml")
	if err != nil {
		t.Fatalf("loading the example production policy: %v", err)
	}
	return p
}

func httpCtx(subject string, roles ...string) Context {
	return Context{
		Principal: Principal{Subject: subject, Roles: roles, Authenticated: true},
		ConnID:    "c1", Transport: TransportStreamableHTTP, Node: "n1",
	}
}

func TestProductionPolicyShape(t *testing.T) {
	p := loadProduction(t)
	if p.Name() != "production" || p.File() != "testdata/production.yaml" {
		t.Errorf("name, file = %q, %q", p.Name(), p.File())
	}
	if !p.HasToolRules() || !p.HasReadRules() {
		t.Errorf("HasToolRules, HasReadRules = %v, %v; want both", p.HasToolRules(), p.HasReadRules())
	}
	if want := (Limits{SessionsPerPrincipal: 16, CallsPerSecond: 20, CallBurst: 40}); p.Limits() != want {
		t.Errorf("limits = %+v, want %+v", p.Limits(), want)
	}
	if got := p.RolesFor("bob"); len(got) != 1 || got[0] != "admin" {
		t.Errorf("RolesFor(bob) = %v", got)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	if g.ToolsSource != SourceConfigured || g.ReadsSource != SourceConfigured || g.Name != "production" || !g.Configured() {
		t.Errorf("guard sources %v/%v name %q", g.ToolsSource, g.ReadsSource, g.Name)
	}
	if !g.Authenticator.Required() {
		t.Error("a policy with tokens must require authentication")
	}
	if g.Limits != p.Limits() {
		t.Errorf("guard limits %+v", g.Limits)
	}
}

// TestProductionToolDecisions drives the example policy rule by rule. The
// expected rule is the line of the rule in testdata/production.yaml.
func TestProductionToolDecisions(t *testing.T) {
	p := loadProduction(t)
	line := ruleLines(t, "testdata/production.yaml", "tools:")
	stdio := Context{Principal: StdioPrincipal(), ConnID: "stdio", Transport: TransportStdio}
	cases := []struct {
		name   string
		tool   string
		c      Context
		kind   Kind
		rule   string
		detail string
	}{
		{"admin role from the token", "swarm_get_model", httpCtx("carol", "admin"), KindAllow, line[0], ""},
		{"admin role from the policy roles", "demo.form.click", httpCtx("bob"), KindAllow, line[0], ""},
		{"stdio transport", "swarm_get_model", stdio, KindAllow, line[1], ""},
		{"get_model denied to an operator", "swarm_get_model", httpCtx("alice", "operator"), KindDeny, line[2], "swarm_get_model is for admins only"},
		{"operator lists", "swarm_list", httpCtx("alice", "operator"), KindAllow, line[3], ""},
		{"ci reads a widget", "s1.results.get_rows", httpCtx("ci-bot", "ci"), KindAllow, line[3], ""},
		{"discover tools", "s1.discover_tools", httpCtx("alice", "operator"), KindAllow, line[3], ""},
		{"operator starts", "swarm_start", httpCtx("alice", "operator"), KindAllow, line[4], ""},
		{"ci clicks a form", "s1.form.click", httpCtx("ci-bot", "ci"), KindAllow, line[5], ""},
		{"ci principal glob is exact", "s1.form.click", httpCtx("ci-bot2", "ci"), KindDeny, line[7], "s1.form.click is not allowed by the production policy"},
		{"operator clicks: ask", "s1.form.click", httpCtx("alice", "operator"), KindAsk, line[6], "alice wants to run s1.form.click. Allow it?"},
		{"ci sends keys: deny", "swarm_send_key", httpCtx("ci-bot", "ci"), KindDeny, line[7], "swarm_send_key is not allowed by the production policy"},
		{"no roles", "swarm_list", httpCtx("mallory"), KindDeny, line[7], "swarm_list is not allowed by the production policy"},
		{"unauthenticated connection", "swarm_list", Context{Principal: ConnPrincipal("x"), Transport: TransportSSE}, KindDeny, line[7], "swarm_list is not allowed by the production policy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(context.Background(), tc.tool, nil, tc.c)
			if d.Kind != tc.kind || d.Rule != tc.rule || d.Detail() != tc.detail {
				t.Errorf("Decide(%q) = %v; want %v %q (%s)", tc.tool, d, tc.kind, tc.detail, tc.rule)
			}
		})
	}
}

func TestProductionReadDecisions(t *testing.T) {
	p := loadProduction(t)
	line := ruleLines(t, "testdata/production.yaml", "reads:")
	cases := []struct {
		method string
		c      Context
		kind   Kind
		rule   string
	}{
		{"tools/list", httpCtx("mallory"), KindAllow, line[0]},
		{"resources/templates/list", httpCtx("mallory"), KindAllow, line[0]},
		{"resources/read", httpCtx("mallory"), KindDeny, line[3]},
		{"resources/read", httpCtx("alice", "operator"), KindAllow, line[1]},
		{"resources/subscribe", httpCtx("alice", "operator"), KindAllow, line[1]},
		{"completion/complete", httpCtx("bob"), KindAllow, line[1]},
		{"logging/setLevel", httpCtx("alice", "operator"), KindDeny, line[3]},
		{"logging/setLevel", httpCtx("bob"), KindAllow, line[2]},
		{"prompts/get", httpCtx("ci-bot", "ci"), KindDeny, line[3]},
	}
	for _, tc := range cases {
		d := p.DecideRead(context.Background(), tc.method, nil, tc.c)
		if d.Kind != tc.kind || d.Rule != tc.rule {
			t.Errorf("DecideRead(%q, %s) = %v; want %v (%s)", tc.method, tc.c.Principal.Subject, d, tc.kind, tc.rule)
		}
		if d.Kind == KindDeny && d.Reason != tc.method+" is not allowed by the production policy" {
			t.Errorf("reason %q", d.Reason)
		}
	}
}

// ruleLines returns "<file>:<line>" of each rule ("  - " item) under the
// top-level section header, so the tests follow edits of the example file.
func ruleLines(t testing.TB, path, section string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case l == section:
			in = true
		case in && strings.HasPrefix(l, "  - "):
			out = append(out, path+":"+strconv.Itoa(i+1))
		case in && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#"):
			in = false
		}
	}
	if len(out) == 0 {
		t.Fatalf("no rules under %s in %s", section, path)
	}
	return out
}

func TestPolicyWithoutSections(t *testing.T) {
	p, err := ParsePolicy("bare.yaml", []byte("name: bare\nlimits: {calls_per_second: 1.5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	if g.ToolsSource != SourceDefault || g.ReadsSource != SourceDefault || g.Configured() {
		t.Errorf("a policy without tools/reads must leave the defaults: %v/%v", g.ToolsSource, g.ReadsSource)
	}
	if g.Authenticator != nil {
		t.Error("no tokens and no jwt: Authenticator must be nil")
	}
	ctx := context.Background()
	if d := g.Tools.Decide(ctx, "x", nil, httpCtx("a", "admin")); d.Kind != KindDeny || d.Rule != RuleDefault {
		t.Errorf("tools default: %v", d)
	}
	if d := g.Reads.DecideRead(ctx, "tools/list", nil, httpCtx("a")); d.Kind != KindAllow || d.Rule != RuleDefault {
		t.Errorf("reads default tools/list: %v", d)
	}
	if d := g.Reads.DecideRead(ctx, "resources/read", nil, httpCtx("a")); d.Kind != KindDeny {
		t.Errorf("reads default resources/read: %v", d)
	}
	if p.Limits().CallsPerSecond != 1.5 {
		t.Errorf("limits %+v", p.Limits())
	}
}

// limits.session_state_bytes reaches the guard's limits; left out it is 0,
// which the node reads as the session manager's default.
func TestPolicySessionStateBytes(t *testing.T) {
	p, err := ParsePolicy("state.yaml", []byte("limits:\n  sessions_per_principal: 4\n  session_state_bytes: 262144\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Limits{SessionsPerPrincipal: 4, SessionStateBytes: 256 << 10}); p.Limits() != want {
		t.Errorf("limits = %+v, want %+v", p.Limits(), want)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	if g.Limits.SessionStateBytes != 256<<10 {
		t.Errorf("guard limits %+v", g.Limits)
	}
	if p := loadProduction(t); p.Limits().SessionStateBytes != 0 {
		t.Errorf("a policy without the key has SessionStateBytes %d, want 0 (the default)", p.Limits().SessionStateBytes)
	}
}

func TestExplicitEmptyListsAreConfigured(t *testing.T) {
	p, err := ParsePolicy("empty.yaml", []byte("tools: []\nreads: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := p.Guard()
	if !g.Configured() {
		t.Fatalf("tools: [] and reads: [] must count as configured; sources %v/%v", g.ToolsSource, g.ReadsSource)
	}
	if g.Name != "empty" {
		t.Errorf("name from file = %q", g.Name)
	}
	ctx := context.Background()
	if d := g.Tools.Decide(ctx, "swarm_list", nil, httpCtx("a", "admin")); d.Kind != KindDeny || d.Rule != "empty.yaml:no-match" {
		t.Errorf("empty tools: %v", d)
	}
	if d := g.Reads.DecideRead(ctx, "tools/list", nil, httpCtx("a")); d.Kind != KindDeny || d.Rule != "empty.yaml:no-match" {
		t.Errorf("empty reads: %v", d)
	}
}

func TestLoadPolicyFileErrors(t *testing.T) {
	_, err := LoadPolicyFile(filepath.Join(t.TempDir(), "missing.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestSecurityDocQuotesTheExample keeps docs/SECURITY.md's example policy
// identical to the file the tests load.
func TestSecurityDocQuotesTheExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("testdata/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(example)+"```\n") {
		t.Error("docs/SECURITY.md does not quote testdata/production.yaml verbatim")
	}
}

// limits.connections_per_principal reaches the guard's limits.
func TestPolicyConnectionsPerPrincipal(t *testing.T) {
	p, err := ParsePolicy("conns.yaml", []byte("limits:\n  connections_per_principal: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Limits().ConnectionsPerPrincipal != 8 {
		t.Errorf("limits = %+v, want connections_per_principal 8", p.Limits())
	}
	if _, err := ParsePolicy("conns.yaml", []byte("limits:\n  connections_per_principal: -2\n")); err == nil ||
		!strings.Contains(err.Error(), "limits.connections_per_principal") {
		t.Errorf("negative value: %v", err)
	}
}
