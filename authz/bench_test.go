package authz

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Run: go test -run '^$' -bench . -benchmem ./authz
// Figures are in docs/bench/authz.md.

func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	p := loadProduction(b)
	dev := DevGuard().Tools
	cases := []struct {
		name string
		a    Authorizer
		tool string
		c    Context
	}{
		{"dev-allow-all", dev, "s1.form.click", httpCtx("alice", "operator")},
		{"policy-first-rule", p, "s1.form.click", httpCtx("root", "admin")},
		{"policy-ask-7th-rule", p, "s1.form.click", httpCtx("alice", "operator")},
		{"policy-no-match", p, "s1.form.click", httpCtx("mallory")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				tc.a.Decide(ctx, tc.tool, nil, tc.c)
			}
		})
	}
}

func BenchmarkVisibleTools10k(b *testing.B) {
	ctx := context.Background()
	p := loadProduction(b)
	tools := make([]string, 10000)
	for i := range tools {
		tools[i] = "s" + strconv.Itoa(i%100) + ".w" + strconv.Itoa(i) + ".click"
		if i%3 == 0 {
			tools[i] = "s" + strconv.Itoa(i%100) + ".w" + strconv.Itoa(i) + ".get_value"
		}
	}
	id := func(s string) string { return s }
	b.Run("nil-authorizer", func(b *testing.B) {
		for b.Loop() {
			VisibleTools(ctx, nil, httpCtx("alice"), tools, id)
		}
	})
	b.Run("dev-allow-all", func(b *testing.B) {
		for b.Loop() {
			VisibleTools(ctx, DevGuard().Tools, httpCtx("alice"), tools, id)
		}
	})
	b.Run("production-operator", func(b *testing.B) {
		for b.Loop() {
			VisibleTools(ctx, p, httpCtx("alice", "operator"), tools, id)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	a := productionAuth(b)
	key := issuerKey(b)
	now := time.Now()
	es, _ := jwt.NewWithClaims(jwt.SigningMethodES256, goodClaims(now)).SignedString(key)

	dir := b.TempDir()
	secret := []byte("0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(dir+"/s", secret, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(dir+"/p.yaml", []byte("jwt:\n  issuer: https://issuer.example\n  audience: mcpswarm\n  hs256_secret_file: s\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	hp, err := LoadPolicyFile(dir + "/p.yaml")
	if err != nil {
		b.Fatal(err)
	}
	hg, _ := hp.Guard()
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, goodClaims(now)).SignedString(secret)

	uncached := func(a *Authenticator) *Authenticator { c := *a; c.cache = nil; return &c }
	cases := []struct {
		name  string
		a     *Authenticator
		token string
	}{
		{"static", a, aliceToken},
		{"jwt-hs256-uncached", uncached(hg.Authenticator), hs},
		{"jwt-es256-uncached", uncached(a), es},
		{"jwt-hs256-cached", hg.Authenticator, hs},
		{"jwt-es256-cached", a, es},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.a.Verify(tc.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRateLimiterAllow(b *testing.B) {
	r := NewRateLimiter(Limits{CallsPerSecond: 1e9, CallBurst: 1 << 30})
	for b.Loop() {
		r.Allow("alice")
	}
}

func BenchmarkLoadPolicy(b *testing.B) {
	for b.Loop() {
		if _, err := LoadPolicyFile("testdata/production.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
