package authz

import (
	"context"
	"slices"
	"testing"
)

func TestOwnership(t *testing.T) {
	alice := Principal{Subject: "alice", Roles: []string{"operator"}, Authenticated: true}
	admin := Principal{Subject: "root", Roles: []string{"admin"}, Authenticated: true}
	cases := []struct {
		name  string
		p     Principal
		owner string
		owns  bool
		rule  string
	}{
		{"own", alice, "alice", true, "ownership:owner"},
		{"other", alice, "bob", false, "ownership"},
		{"admin on other", admin, "alice", true, "ownership:admin"},
		{"admin on own", admin, "root", true, "ownership:owner"},
		{"connection owns its sessions", ConnPrincipal("c1"), "conn:c1", true, "ownership:owner"},
		{"connection vs another connection", ConnPrincipal("c1"), "conn:c2", false, "ownership"},
		{"stdio", StdioPrincipal(), "stdio", true, "ownership:owner"},
		{"empty subject owns nothing", Principal{}, "", false, "ownership"},
		{"empty subject with admin owns nothing", Principal{Roles: []string{"admin"}}, "alice", false, "ownership"},
		{"role named like the owner", Principal{Subject: "x", Roles: []string{"alice"}}, "alice", false, "ownership"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owns(tc.p, tc.owner); got != tc.owns {
				t.Errorf("Owns = %v", got)
			}
			d := CheckOwnership(tc.p, "s1", tc.owner)
			if d.Allowed() != tc.owns || d.Rule != tc.rule {
				t.Errorf("CheckOwnership = %v", d)
			}
			if !tc.owns && d.Reason != "session s1 belongs to another principal" {
				t.Errorf("reason %q", d.Reason)
			}
		})
	}
}

func TestPrincipals(t *testing.T) {
	if p := ConnPrincipal("abc"); p.Subject != "conn:abc" || p.Authenticated || len(p.Roles) != 0 {
		t.Errorf("ConnPrincipal = %+v", p)
	}
	if p := StdioPrincipal(); p.Subject != "stdio" || p.Authenticated {
		t.Errorf("StdioPrincipal = %+v", p)
	}
	if !TransportSSE.Network() || !TransportStreamableHTTP.Network() || TransportStdio.Network() || Transport("http").Valid() {
		t.Error("transport classification")
	}
}

type listed struct{ name string }

func TestVisibleTools(t *testing.T) {
	ctx := context.Background()
	tools := []listed{{"swarm_list"}, {"s1.form.click"}, {"boom"}, {"s1.results.get_rows"}, {"swarm_get_model"}, {"other"}}
	name := func(l listed) string { return l.name }
	p := loadProduction(t)
	faulty := AuthorizerFunc(func(ctx context.Context, tool string, args map[string]any, c Context) Decision {
		if !Listing(ctx) {
			t.Error("listing pass not marked in the context")
		}
		if tool == "boom" {
			panic("rule failed")
		}
		return p.Decide(ctx, tool, args, c)
	})
	alwaysAllowNamed := AuthorizerFunc(func(_ context.Context, tool string, _ map[string]any, _ Context) Decision {
		if tool == "boom" {
			panic("rule failed")
		}
		return Allow("x")
	})
	cases := []struct {
		name string
		a    Authorizer
		c    Context
		want []string
		ask  []string // the entries listed as needing approval
	}{
		// Raxol's contract: only what is denied is hidden; an ask is listed, marked.
		{"operator: ask is listed, deny hidden", faulty, httpCtx("alice", "operator"), []string{"swarm_list", "s1.form.click", "s1.results.get_rows", "other"}, []string{"s1.form.click", "other"}},
		{"admin sees all but the panicking entry", faulty, httpCtx("bob"), []string{"swarm_list", "s1.form.click", "s1.results.get_rows", "swarm_get_model", "other"}, nil},
		{"nobody", faulty, httpCtx("mallory"), nil, nil},
		{"panic hides only its entry", alwaysAllowNamed, httpCtx("x"), []string{"swarm_list", "s1.form.click", "s1.results.get_rows", "swarm_get_model", "other"}, nil},
		{"nil authorizer lists everything", nil, httpCtx("x"), []string{"swarm_list", "s1.form.click", "boom", "s1.results.get_rows", "swarm_get_model", "other"}, nil},
		{"default guard lists nothing", DefaultGuard().Tools, httpCtx("x", "admin"), nil, nil},
		{"dev lists everything", DevGuard().Tools, httpCtx("x"), []string{"swarm_list", "s1.form.click", "boom", "s1.results.get_rows", "swarm_get_model", "other"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := VisibleTools(ctx, tc.a, tc.c, tools, name)
			var names, asked []string
			for _, l := range got {
				names = append(names, l.Tool.name)
				if l.Ask {
					asked = append(asked, l.Tool.name)
					if l.Prompt == "" {
						t.Errorf("%s: listed as ask without the prompt", l.Tool.name)
					}
				}
			}
			if !slices.Equal(names, tc.want) || !slices.Equal(asked, tc.ask) {
				t.Fatalf("got %v (ask %v), want %v (ask %v)", names, asked, tc.want, tc.ask)
			}
		})
	}
	if Listing(ctx) {
		t.Error("plain context marked as listing")
	}
}
