package authz

import (
	"context"
	"strings"
	"testing"
)

func allowEmbedder(context.Context, string, map[string]any, Context) Decision {
	return Allow("embedder")
}
func allowEmbedderRead(context.Context, string, any, Context) Decision { return Allow("embedder") }

// TestDefaultsPerMode: what each guard decides with nothing else configured.
func TestDefaultsPerMode(t *testing.T) {
	ctx := context.Background()
	admin := httpCtx("root", "admin")
	modes := []struct {
		name        string
		g           Guard
		source      Source
		toolKind    Kind
		reads       map[string]Kind
		rule        string
		wantName    string
		wantConfigd bool
	}{
		{"framework default", DefaultGuard(), SourceDefault, KindDeny, map[string]Kind{
			"tools/list": KindAllow, "resources/list": KindAllow, "prompts/list": KindAllow,
			"resources/read": KindDeny, "resources/subscribe": KindDeny, "prompts/get": KindDeny,
			"completion/complete": KindDeny, "logging/setLevel": KindDeny, "resources/templates/list": KindDeny,
		}, RuleDefault, DefaultGuardName, false},
		{"dev", DevGuard(), SourceConfigured, KindAllow, map[string]Kind{
			"tools/list": KindAllow, "resources/read": KindAllow, "logging/setLevel": KindAllow,
		}, RuleDev, "dev (allow-all, loopback only)", true},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			if m.g.ToolsSource != m.source || m.g.ReadsSource != m.source || m.g.Configured() != m.wantConfigd {
				t.Errorf("sources %v/%v configured=%v", m.g.ToolsSource, m.g.ReadsSource, m.g.Configured())
			}
			if m.g.Name != m.wantName || m.g.Authenticator != nil {
				t.Errorf("name %q authenticator %v", m.g.Name, m.g.Authenticator)
			}
			for _, tool := range []string{"swarm_list", "swarm_get_model", "demo.form.click"} {
				if d := m.g.Tools.Decide(ctx, tool, nil, admin); d.Kind != m.toolKind || d.Rule != m.rule {
					t.Errorf("tool %s: %v", tool, d)
				}
			}
			for method, kind := range m.reads {
				if d := m.g.Reads.DecideRead(ctx, method, nil, admin); d.Kind != kind || d.Rule != m.rule {
					t.Errorf("read %s: %v, want %v", method, d, kind)
				}
			}
		})
	}
}

type nilAuthorizer struct{}

func (*nilAuthorizer) Decide(context.Context, string, map[string]any, Context) Decision {
	return Allow("x")
}

// TestSourceSemantics: only an operator's or embedder's choice counts as
// configured.
func TestSourceSemantics(t *testing.T) {
	g, err := NewGuard(AuthorizerFunc(allowEmbedder), ReadAuthorizerFunc(allowEmbedderRead))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Configured() || g.Name != EmbedderGuardName {
		t.Errorf("embedder guard: %+v", g)
	}
	var nilPtr *nilAuthorizer
	var nilFunc AuthorizerFunc
	cases := []struct {
		name  string
		tools Authorizer
		reads ReadAuthorizer
		want  string
	}{
		{"nil tools", nil, ReadAuthorizerFunc(allowEmbedderRead), "authz: the tool authorizer is nil"},
		{"nil reads", AuthorizerFunc(allowEmbedder), nil, "authz: the read authorizer is nil"},
		{"typed nil pointer", nilPtr, ReadAuthorizerFunc(allowEmbedderRead), "authz: the tool authorizer is a nil *authz.nilAuthorizer"},
		{"nil func", nilFunc, ReadAuthorizerFunc(allowEmbedderRead), "authz: the tool authorizer is a nil authz.AuthorizerFunc"},
	}
	for _, tc := range cases {
		if _, err := NewGuard(tc.tools, tc.reads); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A policy's sections are configured independently.
	for doc, want := range map[string][2]Source{
		"tools: []\n":            {SourceConfigured, SourceDefault},
		"reads: []\n":            {SourceDefault, SourceConfigured},
		"tools: []\nreads: []\n": {SourceConfigured, SourceConfigured},
		"name: x\n":              {SourceDefault, SourceDefault},
	} {
		g := mustPolicyGuard(t, "p.yaml", doc)
		if g.ToolsSource != want[0] || g.ReadsSource != want[1] {
			t.Errorf("%q: sources %v/%v, want %v/%v", doc, g.ToolsSource, g.ReadsSource, want[0], want[1])
		}
	}
}

func TestGuardPrincipalRoles(t *testing.T) {
	g := mustPolicyGuard(t, "p.yaml", "roles:\n  stdio: [admin]\n  alice: [operator]\n")
	if p := g.Principal(StdioPrincipal()); !p.IsAdmin() {
		t.Errorf("stdio roles not merged: %+v", p)
	}
	p := g.Principal(Principal{Subject: "alice", Roles: []string{"ci", "operator"}, Authenticated: true})
	if strings.Join(p.Roles, ",") != "ci,operator" || !p.Authenticated {
		t.Errorf("merge: %+v", p)
	}
	if p := g.Principal(ConnPrincipal("x")); len(p.Roles) != 0 {
		t.Errorf("conn got roles %v", p.Roles)
	}
}

func TestSafeDecide(t *testing.T) {
	ctx := context.Background()
	c := httpCtx("a")
	panics := AuthorizerFunc(func(context.Context, string, map[string]any, Context) Decision { panic("boom") })
	zero := AuthorizerFunc(func(context.Context, string, map[string]any, Context) Decision { return Decision{} })
	if d := SafeDecide(ctx, panics, "t", nil, c); d.Kind != KindDeny || d.Rule != RulePanic || d.Reason != "authorizer failed: boom" {
		t.Errorf("panic: %v", d)
	}
	if d := SafeDecide(ctx, zero, "t", nil, c); d.Kind != KindDeny || d.Rule != RuleInvalid {
		t.Errorf("zero kind: %v", d)
	}
	if d := SafeDecide(ctx, nil, "t", nil, c); d.Kind != KindAllow || d.Rule != RuleNoAuthorizer {
		t.Errorf("nil: %v", d)
	}
	readPanics := ReadAuthorizerFunc(func(context.Context, string, any, Context) Decision { panic("bang") })
	if d := SafeDecideRead(ctx, readPanics, "resources/read", nil, c); d.Kind != KindDeny || d.Rule != RulePanic {
		t.Errorf("read panic: %v", d)
	}
	if d := SafeDecideRead(ctx, DefaultGuard().Reads, "tools/list", nil, c); d.Kind != KindAllow {
		t.Errorf("read default: %v", d)
	}
}

func TestDecisionValues(t *testing.T) {
	ask := Ask("approve s1.form.click?", "p.yaml:9")
	if got := AuthorizationRequired("s1.form.click", ask); got["error"] != "authorization_required" || got["tool"] != "s1.form.click" || got["decision"] != "ask" || got["detail"] != "approve s1.form.click?" || len(got) != 4 {
		t.Errorf("AuthorizationRequired = %v", got)
	}
	deny := Deny("no", "p.yaml:3")
	if got := ReadDenied("resources/read", deny); got["error"] != "forbidden" || got["method"] != "resources/read" || got["detail"] != "no" || len(got) != 3 {
		t.Errorf("ReadDenied = %v", got)
	}
	if got := ReadDenied("resources/read", ask); got["error"] != "authorization_required" {
		t.Errorf("ReadDenied(ask) = %v", got)
	}
	if s := deny.String(); s != `deny "no" (p.yaml:3)` {
		t.Errorf("String = %s", s)
	}
	if s := Allow("dev").String(); s != "allow (dev)" {
		t.Errorf("String = %s", s)
	}
	if Kind(0).String() != "invalid" || (Decision{}).Allowed() || !Allow("x").Allowed() {
		t.Error("zero decision must not allow")
	}
	if ReadDeniedCode != -32090 {
		t.Error("ReadDeniedCode changed")
	}
}
