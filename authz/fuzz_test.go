package authz

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// noFiles stands in for the file system while fuzzing: key files named by a
// fuzzed policy are never read.
func noFiles(path string) ([]byte, error) {
	return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
}

// FuzzParsePolicy: the loader never panics, every error is a one-line
// *PolicyError, and an accepted policy builds a guard whose decisions are
// well-formed and name a rule.
func FuzzParsePolicy(f *testing.F) {
	if data, err := os.ReadFile("testdata/production.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("tools: []\nreads: []\n"))
	f.Add([]byte("tools:\n  - match: {principals: [\"a*\"], roles: [x], tools: [\"*.form.*\"], transports: [sse]}\n    ask: \"{principal} {tool}\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePolicy("f.yaml", data, "/", noFiles)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error is not a *PolicyError: %#v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		g, err := p.Guard()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, c := range []Context{httpCtx("alice", "admin"), {Principal: StdioPrincipal(), Transport: TransportStdio}} {
			for _, tool := range []string{"swarm_list", "s1.form.click", ""} {
				d := g.Tools.Decide(ctx, tool, nil, c)
				if d.Kind < KindAllow || d.Kind > KindDeny || d.Rule == "" {
					t.Fatalf("malformed decision %#v", d)
				}
			}
			for _, m := range ReadMethods() {
				d := g.Reads.DecideRead(ctx, m, nil, c)
				if d.Kind != KindAllow && d.Kind != KindDeny || d.Rule == "" {
					t.Fatalf("malformed read decision %#v", d)
				}
			}
		}
	})
}

// FuzzAuthenticate: whatever the Authorization header holds, the
// authenticator never panics and either verifies a principal (authenticated,
// valid subject) or refuses with ErrNoToken / ErrBadToken.
func FuzzAuthenticate(f *testing.F) {
	a := productionAuth(f)
	key := issuerKey(f)
	a.now = func() time.Time { return time.Unix(1893456000, 0) } // fixed, so seeds stay valid
	good := goodClaims(time.Unix(1893456000, 0))
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, good).SignedString(key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer " + tok)
	f.Add("Bearer " + aliceToken)
	f.Add("bearer a.b.c")
	f.Add("Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header["Authorization"] = []string{header}
		p, err := a.Authenticate(r)
		if err != nil {
			if !errors.Is(err, ErrBadToken) && !errors.Is(err, ErrNoToken) {
				t.Fatalf("unexpected error class: %v", err)
			}
			if p.Subject != "" || p.Authenticated {
				t.Fatalf("refused but returned %+v", p)
			}
			return
		}
		if !p.Authenticated || validSubject(p.Subject) != nil {
			t.Fatalf("verified an invalid principal %+v", p)
		}
	})
}
