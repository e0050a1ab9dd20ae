package authz

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	aliceToken = "example-alice-token-not-for-production"
	ciToken    = "example-ci-token-not-for-production"
)

// issuerKey is the test-only private key whose public half is
// testdata/issuer-jwks.json.
func issuerKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile("testdata/issuer-test-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(*ecdsa.PrivateKey)
}

type claims = jwt.MapClaims

func goodClaims(now time.Time) claims {
	return claims{
		"iss": "https://issuer.example", "aud": "mcpswarm", "sub": "dave",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Add(-time.Minute).Unix(),
		"roles": []string{"operator"},
	}
}

func with(c claims, kv ...any) claims {
	out := claims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func sign(t testing.TB, m jwt.SigningMethod, key any, c claims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func productionAuth(t testing.TB) *Authenticator {
	t.Helper()
	g, err := loadProduction(t).Guard()
	if err != nil {
		t.Fatal(err)
	}
	return g.Authenticator
}

func TestVerifyTokens(t *testing.T) {
	a := productionAuth(t)
	key := issuerKey(t)
	now := time.Now()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	good := goodClaims(now)

	jwksBytes, _ := os.ReadFile("testdata/issuer-jwks.json")
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good, "")
	// Algorithm confusion: HS256 keyed with the public JWKS bytes.
	confused := sign(t, jwt.SigningMethodHS256, jwksBytes, good, "issuer-2026")

	cases := []struct {
		name    string
		token   string
		subject string
		roles   []string
		errSub  string // "" = must verify
	}{
		{"static token", aliceToken, "alice", []string{"operator"}, ""},
		{"second static token", ciToken, "ci-bot", []string{"ci"}, ""},
		{"jwt good", sign(t, jwt.SigningMethodES256, key, good, "issuer-2026"), "dave", []string{"operator"}, ""},
		{"jwt good without kid", sign(t, jwt.SigningMethodES256, key, good, ""), "dave", []string{"operator"}, ""},
		{"jwt policy roles merged", sign(t, jwt.SigningMethodES256, key, with(good, "sub", "bob"), ""), "bob", []string{"operator", "admin"}, ""},
		{"jwt within leeway", sign(t, jwt.SigningMethodES256, key, with(good, "exp", now.Add(-10*time.Second).Unix()), ""), "dave", []string{"operator"}, ""},
		{"jwt expired", sign(t, jwt.SigningMethodES256, key, with(good, "exp", now.Add(-time.Hour).Unix()), ""), "", nil, "token is expired"},
		{"jwt without exp", sign(t, jwt.SigningMethodES256, key, with(good, "exp", nil), ""), "", nil, "exp claim is required"},
		{"jwt not yet valid", sign(t, jwt.SigningMethodES256, key, with(good, "nbf", now.Add(time.Hour).Unix()), ""), "", nil, "token is not valid yet"},
		{"jwt issued in the future", sign(t, jwt.SigningMethodES256, key, with(good, "iat", now.Add(time.Hour).Unix()), ""), "", nil, "token used before issued"},
		{"jwt wrong issuer", sign(t, jwt.SigningMethodES256, key, with(good, "iss", "https://evil.example"), ""), "", nil, "token has invalid issuer"},
		{"jwt wrong audience", sign(t, jwt.SigningMethodES256, key, with(good, "aud", "other"), ""), "", nil, "token has invalid audience"},
		{"jwt audience list", sign(t, jwt.SigningMethodES256, key, with(good, "aud", []string{"x", "mcpswarm"}), ""), "dave", []string{"operator"}, ""},
		{"jwt wrong signature", sign(t, jwt.SigningMethodES256, other, good, ""), "", nil, "signature is invalid"},
		{"jwt tampered payload", tamper(sign(t, jwt.SigningMethodES256, key, good, "")), "", nil, "signature is invalid"},
		{"jwt unknown kid", sign(t, jwt.SigningMethodES256, key, good, "rotated-away"), "", nil, `no ES256 key with id "rotated-away"`},
		{"jwt alg none", noneTok, "", nil, "signing method none is invalid"},
		{"jwt alg confusion HS256", confused, "", nil, "signing method HS256 is invalid"},
		{"jwt without subject", sign(t, jwt.SigningMethodES256, key, with(good, "sub", nil), ""), "", nil, "subject is empty"},
		{"jwt reserved subject", sign(t, jwt.SigningMethodES256, key, with(good, "sub", "conn:abc"), ""), "", nil, `subject "conn:abc" is reserved`},
		{"jwt stdio subject", sign(t, jwt.SigningMethodES256, key, with(good, "sub", "stdio"), ""), "", nil, `subject "stdio" is reserved`},
		{"jwt roles not a list", sign(t, jwt.SigningMethodES256, key, with(good, "roles", "admin"), ""), "", nil, "cannot unmarshal"},
		{"jwt bad role", sign(t, jwt.SigningMethodES256, key, with(good, "roles", []string{"a b"}), ""), "", nil, `bad role "a b"`},
		{"jwt oversized", sign(t, jwt.SigningMethodES256, key, with(good, "pad", strings.Repeat("x", MaxTokenBytes)), ""), "", nil, "token longer than 8192 bytes"},
		{"unknown static token", "not-a-token", "", nil, "unknown token"},
		{"garbage with dots", "a.b.c", "", nil, "token is malformed"},
		{"empty", "", "", nil, "empty bearer token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Verify(tc.token)
			if tc.errSub != "" {
				if err == nil {
					t.Fatalf("verified as %+v; want an error containing %q", p, tc.errSub)
				}
				if !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("err = %v; want ErrBadToken containing %q", err, tc.errSub)
				}
				if p.Subject != "" || p.Authenticated {
					t.Errorf("a failed verification returned principal %+v", p)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p.Subject != tc.subject || !p.Authenticated || !slices.Equal(p.Roles, tc.roles) {
				t.Errorf("principal %+v; want %s %v authenticated", p, tc.subject, tc.roles)
			}
		})
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	c := goodClaims(time.Now())
	c["sub"] = "mallory"
	b, _ := json.Marshal(c)
	parts[1] = b64url(b)
	return strings.Join(parts, ".")
}

func TestVerifyUsesInjectedClock(t *testing.T) {
	a := productionAuth(t)
	key := issuerKey(t)
	issued := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := sign(t, jwt.SigningMethodES256, key, with(goodClaims(issued)), "")
	a.now = func() time.Time { return issued.Add(30 * time.Minute) }
	if _, err := a.Verify(tok); err != nil {
		t.Fatalf("inside its lifetime: %v", err)
	}
	a.now = func() time.Time { return issued.Add(2 * time.Hour) }
	if _, err := a.Verify(tok); !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("after exp: %v", err)
	}
}

func TestAuthenticateHeader(t *testing.T) {
	a := productionAuth(t)
	cases := []struct {
		name    string
		headers []string
		wantErr error
		subject string
	}{
		{"missing", nil, ErrNoToken, ""},
		{"bearer", []string{"Bearer " + aliceToken}, nil, "alice"},
		{"scheme is case-insensitive", []string{"bearer " + aliceToken}, nil, "alice"},
		{"basic", []string{"Basic YWxpY2U6cHc="}, ErrBadToken, ""},
		{"no token", []string{"Bearer"}, ErrBadToken, ""},
		{"blank token", []string{"Bearer   "}, ErrBadToken, ""},
		{"two headers", []string{"Bearer " + aliceToken, "Bearer " + ciToken}, ErrBadToken, ""},
		{"bad character", []string{"Bearer " + aliceToken + "\x00"}, ErrBadToken, ""},
		{"oversized", []string{"Bearer " + strings.Repeat("a", MaxTokenBytes+1)}, ErrBadToken, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for _, h := range tc.headers {
				r.Header.Add("Authorization", h)
			}
			p, err := a.Authenticate(r)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if p.Subject != tc.subject {
				t.Errorf("subject %q, want %q", p.Subject, tc.subject)
			}
		})
	}
}

func TestNilAuthenticator(t *testing.T) {
	var a *Authenticator
	if a.Required() {
		t.Error("nil authenticator requires tokens")
	}
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	if _, err := a.Authenticate(r); !errors.Is(err, ErrNoToken) {
		t.Errorf("no header: %v", err)
	}
	r.Header.Set("Authorization", "Bearer "+aliceToken)
	if _, err := a.Authenticate(r); !errors.Is(err, ErrBadToken) {
		t.Errorf("a token where nothing can verify it must be refused, got %v", err)
	}
}

func writeFile(t testing.TB, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func pemPublic(t testing.TB, pub any) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

const jwtHead = "jwt:\n  issuer: iss\n  audience: [aud]\n"

func TestHS256Policy(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("0123456789abcdef0123456789abcdef")
	writeFile(t, dir, "secret", append(secret, '\n'))
	writeFile(t, dir, "p.yaml", []byte(jwtHead+"  hs256_secret_file: secret\n"))
	p, err := LoadPolicyFile(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := p.Guard()
	c := claims{"iss": "iss", "aud": "aud", "sub": "svc", "exp": time.Now().Add(time.Minute).Unix()}
	if pr, err := g.Authenticator.Verify(sign(t, jwt.SigningMethodHS256, secret, c, "")); err != nil || pr.Subject != "svc" {
		t.Fatalf("HS256: %+v %v", pr, err)
	}
	if _, err := g.Authenticator.Verify(sign(t, jwt.SigningMethodHS384, secret, c, "")); err == nil || !strings.Contains(err.Error(), "signing method HS384 is invalid") {
		t.Fatalf("HS384 must be refused: %v", err)
	}
	if _, err := g.Authenticator.Verify(sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), c, "")); !errors.Is(err, ErrBadToken) {
		t.Fatalf("wrong secret: %v", err)
	}

	writeFile(t, dir, "short", []byte("too-short"))
	writeFile(t, dir, "p2.yaml", []byte(jwtHead+"  hs256_secret_file: short\n"))
	_, err = LoadPolicyFile(filepath.Join(dir, "p2.yaml"))
	if want := "p2.yaml:4: jwt.hs256_secret_file: the secret in " + filepath.Join(dir, "short") + " is 9 bytes; at least 32 are needed"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("short secret: %v", err)
	}
}

func TestPublicKeyPolicy(t *testing.T) {
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	writeFile(t, dir, "keys.pem", append(pemPublic(t, &rsaKey.PublicKey), pemPublic(t, &ecKey.PublicKey)...))
	writeFile(t, dir, "p.yaml", []byte(jwtHead+"  public_keys: [keys.pem]\n"))
	p, err := LoadPolicyFile(filepath.Join(dir, "p.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := p.Guard()
	c := claims{"iss": "iss", "aud": "aud", "sub": "svc", "exp": time.Now().Add(time.Minute).Unix()}
	for _, tc := range []struct {
		m   jwt.SigningMethod
		key any
		ok  bool
	}{
		{jwt.SigningMethodRS256, rsaKey, true},
		{jwt.SigningMethodES384, ecKey, true},
		{jwt.SigningMethodRS512, rsaKey, false}, // only the key's default algorithm
		{jwt.SigningMethodPS256, rsaKey, false},
	} {
		_, err := g.Authenticator.Verify(sign(t, tc.m, tc.key, c, ""))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.m.Alg(), err, tc.ok)
		}
	}

	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	writeFile(t, dir, "small.pem", pemPublic(t, &small.PublicKey))
	der, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	writeFile(t, dir, "private.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	for file, want := range map[string]string{
		"small.pem":   "RSA key of 1024 bits; at least 2048 are needed",
		"private.pem": "holds a PRIVATE KEY; give the public key only",
	} {
		writeFile(t, dir, "bad.yaml", []byte(jwtHead+"  public_keys: ["+file+"]\n"))
		if _, err := LoadPolicyFile(filepath.Join(dir, "bad.yaml")); err == nil || !strings.Contains(err.Error(), "bad.yaml:4: jwt.public_keys: ") || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: %v", file, err)
		}
	}
}

func TestJWKSErrors(t *testing.T) {
	cases := map[string]string{
		`{"keys":[]}`: "no signature key in the JWKS",
		`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}]}`: "holds private key material",
		`{"keys":[{"kty":"oct","k":"AAAA"}]}`:                              `unsupported kty "oct"`,
		`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`:      "P-256 coordinates must be 32 bytes",
		`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","alg":"RS256"}]}`:     "RSA key of 17 bits",
		`{"keys":[{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"}]}`:       "no signature key in the JWKS",
		`not json`: "parsing JWKS",
	}
	for doc, want := range cases {
		if _, err := parseJWKS([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
	// A point not on the curve.
	bad := `{"keys":[{"kty":"EC","crv":"P-256","x":"` + b64url(make([]byte, 32)) + `","y":"` + b64url(append(make([]byte, 31), 1)) + `"}]}`
	if _, err := parseJWKS([]byte(bad)); err == nil || !strings.Contains(err.Error(), "bad P-256 point") {
		t.Errorf("off-curve point: %v", err)
	}
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestJWTCache(t *testing.T) {
	a := productionAuth(t)
	key := issuerKey(t)
	issued := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := issued.Add(time.Minute)
	a.now = func() time.Time { return clock }
	tok := sign(t, jwt.SigningMethodES256, key, with(goodClaims(issued), "sub", "bob"), "")

	p1, err := a.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.cache.m) != 1 {
		t.Fatalf("cache holds %d entries after one verification", len(a.cache.m))
	}
	p1.Roles[0] = "tampered"
	p2, err := a.Verify(tok)
	if err != nil || !slices.Equal(p2.Roles, []string{"operator", "admin"}) || p2.Subject != "bob" || !p2.Authenticated {
		t.Fatalf("cached verification: %+v %v (a caller's edit must not reach the cache)", p2, err)
	}
	// Static tokens hand out copies too.
	s1, _ := a.Verify(aliceToken)
	s1.Roles[0] = "admin"
	if s2, _ := a.Verify(aliceToken); s2.IsAdmin() {
		t.Fatal("editing a static token's principal changed the policy")
	}
	// Past exp and the leeway the cached entry is gone and the token refused.
	clock = issued.Add(time.Hour + time.Minute)
	if _, err := a.Verify(tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("expired cached token: %v", err)
	}
	if len(a.cache.m) != 0 {
		t.Fatalf("expired entry kept: %d", len(a.cache.m))
	}
	// A failed verification is not cached.
	bad := sign(t, jwt.SigningMethodES256, key, with(goodClaims(issued), "iss", "x"), "")
	clock = issued.Add(time.Minute)
	if _, err := a.Verify(bad); err == nil || len(a.cache.m) != 0 {
		t.Fatalf("bad token: %v, cache %d", err, len(a.cache.m))
	}
}

func TestJWTCacheBounded(t *testing.T) {
	c := newJWTCache()
	now := time.Unix(0, 0)
	for i := range maxCachedJWTs {
		var k [32]byte
		k[0], k[1] = byte(i), byte(i>>8)
		exp := now.Add(time.Hour)
		if i%2 == 0 {
			exp = now.Add(time.Second)
		}
		c.put(k, Principal{Subject: "s"}, exp, now)
	}
	later := now.Add(time.Minute)
	c.put([32]byte{0xff, 0xff, 0xff}, Principal{}, later.Add(time.Hour), later)
	if len(c.m) != maxCachedJWTs/2+1 {
		t.Fatalf("after sweeping expired entries: %d", len(c.m))
	}
	for i := len(c.m); i < maxCachedJWTs; i++ {
		var k [32]byte
		k[2], k[3] = byte(i), byte(i>>8)
		c.put(k, Principal{}, later.Add(time.Hour), later)
	}
	c.put([32]byte{1, 2, 3, 4, 5}, Principal{}, later.Add(time.Hour), later)
	if len(c.m) != 1 {
		t.Fatalf("a full cache of live entries must start over, has %d", len(c.m))
	}
}
